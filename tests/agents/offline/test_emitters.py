"""Every kernel template against eager PyTorch: C (OpenMP) on CPU through the real runtime,
the CUDA versions on a GPU, and an nvcc syntax check of the CUDA source everywhere nvcc is."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
import torch

from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
from stitchcuda_lab.agents.offline.lower import build_spec
from stitchcuda_lab.agents.offline.planner import fusion_groups
from stitchcuda_lab.agents.offline.rewrite import rewrite
from stitchcuda_lab.graph import analyse

from .conftest import assert_close, cuda_compile_errors, generate, make_problem, run_both

CASES = {
    "pointwise_chain_odd": """
        class Model(nn.Module):
            def forward(self, x):
                y = torch.relu(x * 2.0 + 1.0) - 0.5
                y = torch.sigmoid(y) + torch.tanh(x) * F.gelu(x) + F.silu(y)
                y = F.mish(y) + F.hardswish(x) + F.elu(x) + F.softplus(x) - F.leaky_relu(x, 0.1)
                y = torch.clamp(y, -3.0, 3.0) + torch.where(x > 0, x, 0.5 * x) + x ** 2
                return y / (torch.abs(x) + 1.0) + torch.exp(-x * x) + torch.log1p(torch.abs(x))
        def get_inputs():
            return [torch.randn(7, 13, 5)]
        def get_init_inputs():
            return []
    """,
    "broadcast_size1_scalar": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(9))
                self.gain = nn.Parameter(torch.rand(7, 1) + 0.5)
                self.s = nn.Parameter(torch.tensor(1.5))
            def forward(self, x, rows):
                y = x * self.gain + self.bias
                y = (y - self.s) * rows
                return F.gelu(y, approximate="tanh") * 3.0
        def get_inputs():
            return [torch.randn(5, 7, 9), torch.rand(5, 1, 9)]
        def get_init_inputs():
            return []
    """,
    "broadcast_float4_lanes": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(8))          # read as one float4
                self.gain = nn.Parameter(torch.rand(7, 1) + 0.5)  # read once per float4
                self.s = nn.Parameter(torch.tensor(0.25))
            def forward(self, x, rows):
                y = x * self.gain + self.bias
                return torch.tanh(y * rows - self.s) / 3.0
        def get_inputs():
            return [torch.randn(5, 7, 8), torch.rand(5, 1, 8)]
        def get_init_inputs():
            return []
    """,
    "noncontiguous_inputs": """
        class Model(nn.Module):
            def forward(self, x, y):
                z = y.transpose(0, 1)
                return torch.exp(x) * x + z * 2.0 + 1.0
        def get_inputs():
            return [torch.randn(17, 9).t(), torch.randn(17, 9)]
        def get_init_inputs():
            return []
    """,
    "bool_outputs_and_where": """
        class Model(nn.Module):
            def forward(self, x, y):
                m = (x > y) & (y > -0.5)
                return m, torch.where(m, x, y) + x.maximum(y)
        def get_inputs():
            return [torch.randn(33, 3), torch.randn(33, 3)]
        def get_init_inputs():
            return []
    """,
    "float64_chain": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.tanh(x * 0.7) + torch.sigmoid(x) * torch.exp(-x.abs())
        def get_inputs():
            return [torch.randn(11, 29, dtype=torch.float64)]
        def get_init_inputs():
            return []
    """,
    "softmax_last_and_middle": """
        class Model(nn.Module):
            def forward(self, x, y):
                a = torch.softmax(x / 0.7, dim=-1)
                b = torch.log_softmax(y, dim=1)
                return a * 2.0, b
        def get_inputs():
            return [torch.randn(6, 37), torch.randn(3, 5, 4, 7)]
        def get_init_inputs():
            return []
    """,
    "softmax_long_rows": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=-1)
        def get_inputs():
            return [torch.randn(3, 3001) * 4]
        def get_init_inputs():
            return []
    """,
    "wide_rows_unrolled": """
        class Model(nn.Module):
            def forward(self, x, y, z, w):
                return (torch.softmax(x, dim=-1), torch.argmax(z, dim=-1),
                        F.gelu(F.layer_norm(y, (y.shape[-1],))),
                        torch.amax(y, dim=-1) - y.mean(dim=-1), torch.log_softmax(w, dim=-1))
        def get_inputs():
            # rows of 1025 float4 (block of 512: 3 loads per thread, a partial last group) and
            # of 512 float4 (block of 256: 2 loads each, whole groups); a row with two NaNs,
            # where argmax must name the first one as torch does
            z = torch.randn(6, 4100)
            z[1, 3001] = float("nan")
            z[1, 7] = float("nan")
            # (the 2048 and 16384 rows stay in registers between passes: 2 and 8 float4 each)
            return [torch.randn(6, 4100) * 3, torch.randn(5, 2048) * 2 + 1, z,
                    torch.randn(3, 16384) * 5]
        def get_init_inputs():
            return []
    """,
    "layernorm_2d_gelu_residual": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln = nn.LayerNorm([6, 7])
                with torch.no_grad():
                    self.ln.weight.uniform_(0.5, 1.5)
                    self.ln.bias.uniform_(-0.5, 0.5)
            def forward(self, x):
                return F.gelu(self.ln(x)) + x
        def get_inputs():
            return [torch.randn(5, 6, 7) * 3 + 1]
        def get_init_inputs():
            return []
    """,
    "group_and_instance_norm": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.gn = nn.GroupNorm(3, 12)
                self.inorm = nn.InstanceNorm2d(12, affine=True)
                with torch.no_grad():
                    self.gn.weight.uniform_(0.5, 1.5)
                    self.inorm.bias.uniform_(-0.5, 0.5)
            def forward(self, x):
                return F.silu(self.gn(x)), torch.relu(self.inorm(x))
        def get_inputs():
            return [torch.randn(2, 12, 5, 3)]
        def get_init_inputs():
            return []
    """,
    "batchnorm_train": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm2d(6)
            def forward(self, x):
                return torch.tanh(self.bn(x))
        def get_inputs():
            return [torch.randn(4, 6, 5, 3) * 2 + 1]
        def get_init_inputs():
            return []
    """,
    "batchnorm_eval": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm1d(10)
                with torch.no_grad():
                    self.bn.running_mean.uniform_(-1, 1)
                    self.bn.running_var.uniform_(0.5, 2)
                self.eval()
            def forward(self, x):
                return torch.relu(self.bn(x))
        def get_inputs():
            return [torch.randn(8, 10, 3)]
        def get_init_inputs():
            return []
    """,
    "rms_norm_both_forms": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.rand(24) + 0.5)
            def forward(self, x):
                manual = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
                return manual, F.rms_norm(x, (24,), self.w, 1e-5)
        def get_inputs():
            return [torch.randn(3, 5, 24)]
        def get_init_inputs():
            return []
    """,
    "reductions_along_dims": """
        class Model(nn.Module):
            def forward(self, x):
                s = x.sum(1, keepdim=True) * 0.5
                m = x.mean(dim=[0, 2])
                a = x.amax(-1)
                v, i = x.max(dim=-1)
                lo = x.min(dim=1, keepdim=True).values
                return (s, m, a + v, i, x.argmax(0), x.argmin(-1), x.var(-1),
                        x.std(1, correction=0), torch.logsumexp(x, -1), x - lo)
        def get_inputs():
            return [torch.randn(4, 9, 6)]
        def get_init_inputs():
            return []
    """,
    # rows interleaved in memory (the last dim kept): the C kernel runs neighbouring rows as
    # one vector loop, a whole run of the last dim (x), 64 of them (y), or 64 and a short
    # block (z); an operand along the kept dim
    "reductions_along_a_middle_dim": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.randn(70))
            def forward(self, x, y, z):
                v, i = x.max(dim=1)
                return (x.sum(1) + self.b, v, i, x.argmin(1), x.var(1), x.prod(1),
                        torch.logsumexp(x, 1), torch.log_softmax(x, 1) * 0.5,
                        y.mean(1, keepdim=True), y.std(1), y.amin(1) - self.b.mean(),
                        z.sum(1), torch.softmax(z, 1))
        def get_inputs():
            return [torch.randn(20, 9, 70), torch.rand(2, 600, 128) + 10.0,
                    torch.randn(3, 5, 100)]
        def get_init_inputs():
            return []
    """,
    "gemm_epilogue_mlp": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(16, 24)
                self.fc2 = nn.Linear(24, 8)
            def forward(self, x, r):
                return self.fc2(F.gelu(self.fc1(x)) * 0.5) + r
        def get_inputs():
            return [torch.randn(5, 16), torch.randn(5, 8)]
        def get_init_inputs():
            return []
    """,
    "conv_relu_pool": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, padding=1)
                self.scale = nn.Parameter(torch.rand(4, 1, 1) + 0.5)
            def forward(self, x):
                return F.max_pool2d(torch.relu(self.conv(x) * self.scale), 2)
        def get_inputs():
            return [torch.randn(2, 3, 8, 8)]
        def get_init_inputs():
            return []
    """,
    "conv_bn_relu_maxpool": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(4)
                with torch.no_grad():
                    self.bn.running_mean.copy_(torch.randn(4) * 0.1)
                    self.bn.running_var.copy_(torch.rand(4) + 0.5)
                self.eval()
            def forward(self, x):
                return nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        def get_inputs():
            return [torch.randn(2, 3, 12, 10)]
        def get_init_inputs():
            return []
    """,
    "conv_gelu_avgpool_mean": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 5, 3)
            def forward(self, x):
                return F.avg_pool2d(F.gelu(self.conv(x)), 2).mean(dim=(2, 3))
        def get_inputs():
            return [torch.randn(2, 3, 10, 12)]
        def get_init_inputs():
            return []
    """,
    "conv_transpose_bias_tanh": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.deconv = nn.ConvTranspose2d(4, 3, 4, stride=2, padding=1)
                self.bias = nn.Parameter(torch.randn(3, 1, 1) * 0.1)
            def forward(self, x):
                return torch.tanh(self.deconv(x) - self.bias)
        def get_inputs():
            return [torch.randn(2, 4, 5, 6)]
        def get_init_inputs():
            return []
    """,
    "maxpool_overlap_fused": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(4, 1, 1))
            def forward(self, x):
                y = F.max_pool2d(torch.relu(x + self.bias), 3, stride=2, padding=1, dilation=2)
                return torch.sigmoid(y) * 2.0
        def get_inputs():
            return [torch.randn(2, 4, 17, 18)]
        def get_init_inputs():
            return []
    """,
    "avgpool3d_exclude_pad": """
        class Model(nn.Module):
            def forward(self, x):
                return F.avg_pool3d(torch.tanh(x), 3, stride=2, padding=1,
                                    count_include_pad=False) - 1.0
        def get_inputs():
            return [torch.randn(2, 3, 7, 8, 9)]
        def get_init_inputs():
            return []
    """,
    "adaptive_avgpool3d": """
        class Model(nn.Module):
            def forward(self, x):
                return F.adaptive_avg_pool3d(torch.relu(x), (3, 4, 2)) * 0.5
        def get_inputs():
            return [torch.randn(2, 3, 7, 9, 5)]
        def get_init_inputs():
            return []
    """,
    "small_full_reduction": """
        class Model(nn.Module):
            def forward(self, x):
                return x.sum() * 2.0, (x * x).mean()
        def get_inputs():
            return [torch.randn(3, 5)]
        def get_init_inputs():
            return []
    """,
}

FUSED_EXPECTED = {"conv_relu_pool": 1, "gemm_epilogue_mlp": 2}

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_program_matches_eager(case, device, settings):
    problem = make_problem(CASES[case], name=case)
    settings = settings.replace(device=device)
    _graph, plan, cand = generate(problem, settings, device=device)
    assert cand.kernels, f"no kernel generated:\n{plan}\n{cand.notes}"
    assert len(cand.kernels) >= FUSED_EXPECTED.get(case, 1)
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, device=device, seed=seed)
        assert_close(got, want)


def test_float16_chain_keeps_dtype_within_half_tolerance(settings):
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.sigmoid(x * 1.5) + x
        def get_inputs():
            return [torch.randn(9, 31).half()]
        def get_init_inputs():
            return []
    """)
    _, _, cand = generate(problem, settings)
    want, got, _, _ = run_both(problem, cand)
    assert got.dtype == torch.float16
    assert_close(got, want, atol=1e-2, rtol=1e-2)


def test_batchnorm_train_kernel_updates_running_stats_like_eager(settings):
    problem = make_problem(CASES["batchnorm_train"])
    _, _, cand = generate(problem, settings)
    _, _, ref, new = run_both(problem, cand)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(new.bn, name), getattr(ref.bn, name),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape, lanes", [("2, 1 << 21", False), ("2, 1 << 14, 64", True)])
def test_long_float_rows_are_summed_as_accurately_as_float64_allows(settings, shape, lanes):
    """Rows of 2^21 positive floats (mean 10.5): a float sum per vector lane drifts by about
    1e-3 of the row's mean and variance; the C kernel adds such rows in double. Rows along a
    middle dim run as vector lanes across rows, each lane adding its row one element at a
    time: over 16384 floats that drifts by about 1e-4, so such lanes add in double from much
    shorter rows."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return torch.stack([x.mean(dim=1), x.var(dim=1, unbiased=False),
                                    torch.softmax(x, dim=1).sum(dim=1)])
        def get_inputs():
            return [torch.rand({shape}) + 10.0]
        def get_init_inputs():
            return []
    """)
    _, _, cand = generate(problem, settings)
    assert cand.kernels and all(("ln < nl" in k.code) == lanes for k in cand.kernels)
    x = problem.make_inputs(device="cpu", seed=0)[0]
    _, got, _, _ = run_both(problem, cand)
    x64 = x.double()
    want = torch.stack([x64.mean(dim=1), x64.var(dim=1, unbiased=False),
                        torch.softmax(x64, dim=1).sum(dim=1)])
    torch.testing.assert_close(got.double(), want, atol=0, rtol=2e-6)


def test_a_max_whose_indices_nothing_reads_is_a_plain_max_and_keeps_nan(settings):
    """``torch.max(x, dim)[0]`` reduces to values and indices; with the indices unread the
    kernel carries none (one compare per element), and a NaN still wins its row."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.max(x, 1)[0], torch.min(x, -1).values
        def get_inputs():
            x = torch.randn(4, 9, 70)
            x[1, 3, 5] = float("nan")
            x[2, 1, 69] = float("nan")
            return [x]
        def get_init_inputs():
            return []
    """)
    graph = rewrite(analyse(problem, device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    kinds = [s.kind for k, members in enumerate(groups)
             for s in build_spec(graph, members, f"k{k}").stmts if s.op == "reduce"]
    assert sorted(kinds) == ["max", "min"], kinds
    _, _, cand = generate(problem, settings)
    want, got, _, _ = run_both(problem, cand)
    for g, w in zip(got, want):
        assert w.isnan().sum() == 2
        torch.testing.assert_close(g, w, atol=0, rtol=0, equal_nan=True)


# -- CUDA source: syntax-compiled by nvcc, every template and launch variant --------------------
VARIANTS = [{}, {"vec": 1}, {"rows": "block", "block": 128}, {"rows": "warp", "ipt": 2},
            {"rows": "block", "cache": True}, {"rows": "block", "cache": True, "vec": 1},
            {"rows": "block", "cache": True, "unroll": 3}, {"ipt": 3, "block": 128},
            {"rows": "split"}, {"rows": "split", "block": 128},
            {"rows": "block", "cluster": 2}, {"rows": "block", "cluster": 8, "vec": 1}]


def _all_cuda_sources() -> str:
    parts = []
    k = 0
    for case in sorted(CASES):
        graph = rewrite(analyse(make_problem(CASES[case], name=case), device="cpu", profile=False))
        groups, _ = fusion_groups(graph)
        for members in groups:
            for params in VARIANTS:
                spec = build_spec(graph, members, f"k{k}")
                k += 1
                parts.append(emit_cuda(spec, params))
    return "\n".join(parts), k


def test_every_emitted_cuda_kernel_compiles(tmp_path):
    """With nvcc where it is, else NVRTC (no GPU needed for either): 448 kernels in one
    program, to PTX, in about 17 s on two cores (nvcc: 11 s for 344)."""
    source, count = _all_cuda_sources()
    assert count >= 60
    errors = cuda_compile_errors({"kernels": source}, tmp_path)
    assert errors == "", errors


def test_cpu_fused_chain_on_16m_floats_is_one_kernel_and_right(settings):
    """Six pointwise ops on 16M floats become one kernel (one read of x, one write) that
    agrees with eager. How much faster that is, is the bench's to say (docs/PERFORMANCE.md,
    "On the CPU"), not a timed unit test's: on a loaded 2-core machine a ratio moves."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                y = x * 1.5 + 0.25
                y = torch.relu(y) - 0.1
                y = y * y + x
                return torch.clamp(y, -2.0, 2.0) * 0.5
        def get_inputs():
            return [torch.randn(16 * 1024 * 1024)]
        def get_init_inputs():
            return []
    """)
    _, plan, cand = generate(problem, settings)
    assert [t.kind for t in plan.tasks] == ["pointwise_fusion"] and len(plan.tasks[0].ops) >= 6
    assert len(cand.kernels) == 1 and not cand.kept
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


def _row_spec(cols: int, body: str = "F.gelu(F.layer_norm(x, (x.shape[-1],)))"):
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return {body}
        def get_inputs():
            return [torch.randn(8, {cols})]
        def get_init_inputs():
            return []
    """, name=f"ln{cols}")
    graph = rewrite(analyse(problem, device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    return build_spec(graph, groups[0], "k0")


def test_a_short_row_stays_in_registers_and_a_long_one_in_shared_memory():
    from stitchcuda_lab.agents.offline.launch import (default_params, launch_config,
                                                      row_in_registers)
    spec = _row_spec(4096)           # 256 threads x 4 float4: the whole row in registers
    p = default_params(spec)
    assert row_in_registers(spec, p) and "smem" not in launch_config(spec, p)
    src = emit_cuda(spec, p)
    assert "extern __shared__" not in src
    assert "float4 a_in0[4];   // this thread's share of the row" in src
    assert src.count("__ldg(reinterpret_cast<const float4*>(in0") == 1   # read once
    spec = _row_spec(32768)          # 512 threads x 16 float4: too many registers
    p = default_params(spec)
    assert not row_in_registers(spec, p) and launch_config(spec, p)["smem"] == 32768 * 4
    assert "extern __shared__" in emit_cuda(spec, p)
    # without the cache flag the row is read from memory in each pass, still four float4
    # loads in flight per thread, each with its own Welford accumulator
    src = emit_cuda(_row_spec(4096), {"cache": False})
    assert src.count("__ldg(reinterpret_cast<const float4*>(in0") == 2
    assert "float4 a_in0[4];" in src and "sc_wf<float> av2_p[4];" in src
    assert "float4 a_in0[1];" in emit_cuda(_row_spec(4096), {"cache": False, "unroll": 1})


def test_a_row_too_long_for_a_blocks_cache_is_shared_by_a_cluster(tmp_path):
    """A softmax over rows of 393216 floats (1.5 MB: KernelBench's level-1 Softmax) does not
    fit one block's row cache, and its second pass read the row from DRAM again: the eight
    blocks of a cluster take a slice each (196 KB of shared memory), cache it, and combine
    their partial states through distributed shared memory; a row of 65535 (an L1 norm's,
    256 KB) takes two. Rows one block caches, and single-pass reductions, keep a block a row.
    Before Hopper the same launch runs the plain kernel, a group's first block on the row."""
    from stitchcuda_lab.agents.offline.launch import (CACHE_LIMIT, default_params,
                                                      launch_config, row_cluster)
    spec = _row_spec(393216, "torch.softmax(x, dim=1)")
    p = default_params(spec)
    assert p["cluster"] == 8 and p["cache"] and p["vec"] == 4
    assert launch_config(spec, p) == {"blocks": 64, "block": 1024, "waves": 512,
                                      "smem": 49152 * 4, "cluster": 8}   # an SM's threads
    src = emit_cuda(spec, p)
    shared, alone = src.split("#else\n    __shared__")[0], src.split("#else\n    __shared__")[1]
    assert "__launch_bounds__(1024) SC_CLUSTER(8) k0(" in src
    assert "sc_cluster_reduce(av2, sc_sm_comb(), &cl_v2, 8u);" in shared
    assert shared.count("__ldg(reinterpret_cast<const float4*>(in0") == 1   # DRAM once
    assert "jlo = (long long)sc_rank * 49152" in shared and "4 * (q - qlo)" in shared
    assert "if (blockIdx.x % 8) return;" in alone and "sc_cluster" not in alone
    assert alone.count("__ldg(reinterpret_cast<const float4*>(in0") == 2
    l1 = _row_spec(65535, "x / torch.sum(torch.abs(x), dim=1, keepdim=True)")
    assert row_cluster(l1, default_params(l1)) == 2 and default_params(l1)["vec"] == 1
    assert launch_config(l1, default_params(l1))["smem"] == 32768 * 4
    fits = _row_spec(CACHE_LIMIT // 4, "torch.softmax(x, dim=1)")
    assert "cluster" not in default_params(fits)
    assert "cluster" not in default_params(_row_spec(393216, "x.sum(1)"))   # one pass
    plain = emit_cuda(spec, {**p, "cluster": 0})
    assert "SC_CLUSTER" not in plain.split("#endif\n\n")[-1] and "smem" not in \
        launch_config(spec, {**p, "cluster": 0})
    sources = {"sm": src, "l1": emit_cuda(l1, default_params(l1)), "plain": plain}
    assert cuda_compile_errors(sources, tmp_path, cubin=True) == ""
    assert cuda_compile_errors(sources, tmp_path, cubin=True, arch="80") == ""


def test_a_clustered_programs_grid_is_whole_clusters(settings):
    """The program launches a whole number of clusters (the grid's cap of blocks a
    multiprocessor need not be one) and asks for the row cache's shared memory only where
    clusters exist: before Hopper the kernel's plain body runs and a request of 196 KB would
    be past what the GPU has."""
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.log_softmax(x, dim=-1)
        def get_inputs():
            return [torch.randn(6, 300001)]
        def get_init_inputs():
            return []
    """, name="long_rows")
    graph = analyse(problem, device="cpu", profile=False, settings=settings)
    graph = dataclasses.replace(graph, device="cuda")
    plan = OfflinePlanner().plan(problem, graph, settings)
    (task,) = [t for t in plan.tasks if t.kind != "keep"]
    assert task.params["cluster"] == 8
    src = OfflineCoder().candidate(problem, graph, plan, {}).module_source()
    assert "'k0_t1': max(8, max(1, min(48, _SM * 512)) // 8 * 8)," in src
    assert "shared_mem=150016 if _CLUSTERS else 0)" in src
    assert "_CLUSTERS = torch.cuda.is_available() and " \
        "torch.cuda.get_device_capability()[0] in (9, 10)" in src
    labels = [lbl for lbl, _ in OfflineCoder().variants(graph, plan, {}, 1, None)]
    assert "t1.cluster=0" in labels


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [None, 0, 2, 4, 8])
def test_rows_shared_by_a_cluster_give_atens_results(cluster, settings):
    """Long rows (odd lengths: a scalar tail in the last block's slice, a float4 path where
    the rows are aligned) through every cluster size and none: a softmax, a log-softmax, an
    L1 norm, a layer norm and an argmax (the first of equal maxima, across slices)."""
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    for body, shape in (("torch.softmax(x * 3.0, dim=1)", "(5, 393216)"),
                        ("torch.log_softmax(x, dim=1)", "(7, 100003)"),
                        ("x / torch.sum(torch.abs(x), dim=1, keepdim=True)", "(9, 65535)"),
                        ("F.layer_norm(x, (x.shape[-1],)) * 2.0", "(3, 262144)"),
                        ("torch.argmax(x.round() - x.round().amax(1, keepdim=True), 1)",
                         "(4, 200004)")):
        problem = make_problem(f"""
            class Model(nn.Module):
                def forward(self, x):
                    return {body}
            def get_inputs():
                return [torch.randn{shape} * 4.0]
            def get_init_inputs():
                return []
        """, name="cluster_rows")
        cuda = settings.replace(device="cuda")
        graph = analyse(problem, device="cuda", profile=False, settings=cuda)
        plan = OfflinePlanner().plan(problem, graph, cuda)
        tasks = [t for t in plan.tasks if "rows" in t.params and t.params["rows"] == "block"]
        over = {t.id: {**t.params, "cluster": cluster} for t in tasks if cluster is not None}
        cand = OfflineCoder().candidate(problem, graph, plan, over)
        if cluster:
            assert any(f"SC_CLUSTER({cluster})" in k.code for k in cand.kernels), body
        for seed in (0, 1):
            want, got, _, _ = run_both(problem, cand, device="cuda", seed=seed)
            if want.dtype == torch.int64:
                assert torch.equal(got, want), body
            else:
                assert_close(got, want, atol=1e-5, rtol=1e-4)


def _middle_spec(channels: int, side: int = 256):
    """An RMS norm over the channels of an NCHW tensor: rows interleaved, a thread each (2 x
    256 x 256 rows: enough to fill the GPU so)."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)
        def get_inputs():
            return [torch.rand(2, {channels}, {side}, {side})]
        def get_init_inputs():
            return []
    """, name=f"rms{channels}")
    graph = rewrite(analyse(problem, device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    return build_spec(graph, groups[0], "k0")


def test_a_thread_keeps_a_short_strided_row_in_registers_for_its_second_pass(tmp_path):
    """One thread per row (a reduction over a middle dim): the row read once into a local
    array indexed only by unrolled loops (registers), where the second pass read it again
    from memory; a row past THREAD_ROW_REGS, or the cache flag off, is read twice."""
    from stitchcuda_lab.agents.offline.launch import (THREAD_ROW_REGS, default_params,
                                                      kernel_strategy, launch_config)
    spec = _middle_spec(64)
    p = default_params(spec)
    assert kernel_strategy(spec, p) == "thread" and p["cache"]
    assert "smem" not in launch_config(spec, p)
    src = emit_cuda(spec, p)
    assert "float sc_cache[64];" in src and "extern __shared__" not in src
    assert src.count("__ldg(in0") == 1 and src.count("#pragma unroll\n        for (long long j = 0; j < 64LL;") == 2
    assert "= (float)sc_cache[0 + j];" in src
    for other in (emit_cuda(spec, {**p, "cache": False}),
                  emit_cuda(_middle_spec(THREAD_ROW_REGS + 1), p)):
        assert "sc_cache" not in other and other.count("__ldg(in0") == 2
    assert not default_params(_middle_spec(THREAD_ROW_REGS + 1))["cache"]
    assert cuda_compile_errors({"rms64": src}, tmp_path) == ""


def test_few_interleaved_rows_are_split_among_a_blocks_warps(tmp_path):
    """Rows over a middle dim too few to fill the GPU a thread each (2 x 9 x 9 = 162 of 64
    channels): 32 neighbouring rows a block (a warp's lanes on them: coalesced), each row's
    elements dealt out to the block's warps, their partial states combined through shared
    memory; the lanes past the last row read and write nothing."""
    from stitchcuda_lab.agents.offline.launch import default_params, kernel_strategy, \
        launch_config
    spec = _middle_spec(64, side=9)
    p = default_params(spec)
    assert kernel_strategy(spec, p) == "split" and not p["cache"] and p["vec"] == 1
    assert launch_config(spec, p)["blocks"] == 6   # ceil(162 / 32)
    src = emit_cuda(spec, p)
    assert "sc_split_reduce(" in src and src.count("live && j < 64LL") == 2
    assert "const long long r = live ? r0 + lane : 161LL;" in src
    # a contiguous row asked to split takes its own strategy; a wide one keeps a thread a row
    assert kernel_strategy(_row_spec(512), {"rows": "split"}) == "warp"
    assert kernel_strategy(_middle_spec(64), default_params(_middle_spec(64))) == "thread"
    assert cuda_compile_errors({"split": src, "split128": emit_cuda(spec, {**p, "block": 128})},
                               tmp_path) == ""


def test_a_split_kernel_of_many_reductions_fits_its_shared_memory(tmp_path):
    """Seven fp64 reductions over the same split rows share one shared array as large as the
    largest state: one array each took 56 KB at 512 threads, past the 48 KB a kernel's
    static shared memory may take (the assembler refused it), and the refine round tries
    1024."""
    from stitchcuda_lab.agents.offline.launch import default_params, kernel_strategy
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                y = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
                z = torch.softmax(y, 1) * torch.logsumexp(y * 2, 1, keepdim=True) \
                    + y.var(1, keepdim=True)
                return torch.max(z * x.amax(1, keepdim=True), dim=1)
        def get_inputs():
            return [torch.randn(3, 200, 37, dtype=torch.float64)]
        def get_init_inputs():
            return []
    """, name="many_split")
    graph = rewrite(analyse(problem, device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    assert len(groups) == 1
    spec = build_spec(graph, groups[0], "k0")
    p = default_params(spec)
    assert kernel_strategy(spec, p) == "split" and spec.acc == "double"
    sources = {f"b{b}": emit_cuda(spec, {**p, "block": b}) for b in (512, 1024)}
    assert all(src.count("sc_split_sm[") == 1 and src.count("sc_split_reduce(") >= 7
               for src in sources.values())
    assert cuda_compile_errors(sources, tmp_path, cubin=True) == ""


@pytest.mark.parametrize("device", DEVICES)
def test_split_rows_give_atens_reductions(device, settings):
    """Reductions over a middle dim of few rows (111: not a multiple of the block's 32),
    each kind the split strategy combines across warps: a sum, a max with its index (ties
    to the first), a variance (Welford), a softmax and a log-softmax."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                v, i = torch.max(x.round(), dim=1)
                return (x.sum(1), v, i, torch.var(x, 1), torch.softmax(x, 1),
                        torch.log_softmax(x * 3.0, 1))
        def get_inputs():
            return [torch.randn(3, 200, 37) * 2.0]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings.replace(device=device), device=device)
    assert cand.kernels
    if device == "cuda":
        assert any("'rows': 'split'" in k.code for k in cand.kernels)
    want, got, _, _ = run_both(problem, cand, device=device)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_a_scan_of_several_elements_a_thread_compiles_and_keeps_its_epilogue(tmp_path):
    """``ipt`` elements a thread per chunk of a block-per-row scan: each thread's share is
    loaded and scanned in registers, the chunk advances by block x ipt, and an epilogue that
    reads a prologue value (the cumsum times x) computes it again in the writing loop. One
    element a thread is the kernel as it was."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x, mask):
                return torch.cumsum(x * mask, dim=1) * x
        def get_inputs():
            x = torch.rand(4, 3000)
            return [x, torch.randint(0, 2, x.shape).bool()]
        def get_init_inputs():
            return []
    """, name="mscan")
    graph = rewrite(analyse(problem, device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    spec = build_spec(graph, groups[0], "k0")
    from stitchcuda_lab.agents.offline.launch import default_params
    p = default_params(spec)
    assert p["rows"] == "block" and p["ipt"] == 1
    one, four = emit_cuda(spec, p), emit_cuda(spec, {**p, "ipt": 4})
    assert "c0 += 256LL" in one and "xs[" not in one
    assert "c0 += 1024LL" in four and "float xs[4];" in four
    writing = four[four.index("const float total"):]
    assert "const float v1 = (float)__ldg(in0 + b_in0 + j);" in writing
    assert "(before + xs[k])" in writing and "out2[b_out2 + j] = (float)(v5);" in writing
    assert cuda_compile_errors({"one": one, "four": four}, tmp_path) == ""


def test_welford_and_softmax_take_a_float4_at_a_time():
    src = emit_cuda(_row_spec(4096))
    vec_loop = src[:src.index("jv = 4096LL;")]
    # Welford: the group's mean merged in, one division per float4, none per element
    assert "const float gm = (v1_0 + v1_1 + v1_2 + v1_3) * (float)0.25;" in vec_loop
    assert "mean += d / " not in vec_loop and "mean += d / av" in src   # scalar tail only
    src = emit_cuda(_row_spec(4096, "torch.softmax(x, dim=-1)"))
    vec_loop = src[:src.index("jv = 4096LL;")]
    assert "sc_max(sc_max(" in vec_loop and "else if" not in vec_loop   # no per-element branch


def test_division_by_a_constant_is_a_multiply_and_broadcasts_skip_lane_index_math():
    src = emit_cuda(_row_spec(4096, "torch.log_softmax(x / 0.7, dim=-1)"))
    assert "/ 0.7f" not in src and "* 1.4285714" in src
    problem = make_problem(CASES["broadcast_float4_lanes"], name="bc")
    graph = rewrite(analyse(problem, device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    src = emit_cuda(build_spec(graph, groups[0], "k0"))
    vec = src[:src.index("start = nv * 4;")]
    # gain (7, 1): one load per float4; bias (8,) and rows (5, 1, 8): one float4 load each;
    # no operand is read lane by lane with its own index math
    assert "const float b_in1 = (float)__ldg(in1 + " in vec
    assert "a_in2[u] = __ldg(reinterpret_cast<const float4*>(in2) + " in vec
    assert "a_in3[u] = __ldg(reinterpret_cast<const float4*>(in3) + " in vec
    assert "(i_0)" not in vec and "* 0.3333333333333333f" in vec   # and / 3.0 is a multiply


def test_the_verifier_finds_every_emitted_kernel_by_its_name():
    """The Verifier's trace check looks for the candidate's own kernels by the names its source
    defines (``__launch_bounds__`` stands after the return type here, and a cluster's
    ``SC_CLUSTER(n)`` after it): each must be found."""
    from stitchcuda_lab.verifier.verify import own_kernels
    source, count = _all_cuda_sources()
    assert "SC_CLUSTER(2) k" in source
    assert own_kernels(source) == {f"k{i}" for i in range(count)}


def _gcc() -> bool:
    from stitchcuda_lab.runtime.build import c_compiler
    try:
        out = subprocess.run([c_compiler(), "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except OSError:
        return False
    return "gcc" in out.lower() or "free software foundation" in out.lower()


VECTOR_CASES = {
    # PReLU's weight broadcast along each row, inside a select; sqrt of every element
    "prelu_sqrt": """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.rand(6, 1, 1) * 0.5)
            def forward(self, x):
                return torch.sqrt(torch.abs(torch.where(x > 0, x, self.w * x)) + 1.0)
        def get_inputs():
            return [torch.randn(4, 6, 8, 16)]
        def get_init_inputs():
            return []
    """,
    # rows over three contiguous dims (a group's channels, H, W)
    "group_norm_rows": """
        class Model(nn.Module):
            def forward(self, x):
                return F.group_norm(x, 3) * 2.0
        def get_inputs():
            return [torch.randn(4, 6, 8, 16)]
        def get_init_inputs():
            return []
    """,
}


@pytest.mark.skipif(not _gcc(), reason="the vectoriser's report is GCC's (-fopt-info-vec)")
@pytest.mark.parametrize("case", ["pointwise_chain_odd", "broadcast_size1_scalar",
                                  "layernorm_2d_gelu_residual", "rms_norm_both_forms",
                                  "softmax_long_rows", "group_and_instance_norm",
                                  "batchnorm_train", "reductions_along_a_middle_dim",
                                  *VECTOR_CASES])
def test_every_simd_loop_of_the_c_kernels_is_vectorised(case, tmp_path):
    """Each `#pragma omp simd` loop of these C kernels runs on vector registers, as GCC itself
    reports. Scalar they ran several times slower, and silently: a select on a float compare
    without -fno-trapping-math, sqrtf without -fno-math-errno, `x < 0 || x != x` between two
    masks in the log, a broadcast value read inside the loop (sunk into one branch of a
    select, a masked load of one address), a contiguous row indexed as (j / 16) * 16 + j % 16
    (a gather), a row that is runs apart (a batch norm's N x H x W of an NCHW tensor, a group
    norm's weight that changes every H*W elements: a loop over the runs, the vector loop
    inside), a reduction along a middle dim walked one row at a time (a stride between its
    elements: the vector loop runs across neighbouring rows instead)."""
    import re

    from stitchcuda_lab.agents.offline.backend_c import emit_c
    from stitchcuda_lab.runtime import build
    body = CASES.get(case) or VECTOR_CASES[case]
    graph = rewrite(analyse(make_problem(body, name=case), device="cpu", profile=False))
    groups, _ = fusion_groups(graph)
    assert groups
    for k, members in enumerate(groups):
        src = emit_c(build_spec(graph, members, f"k{k}"))
        path = tmp_path / f"k{k}.c"
        path.write_text(src)
        report = subprocess.run([build.c_compiler(), *build.C_FLAGS, "-fopt-info-vec-all", "-o",
                                 str(tmp_path / f"k{k}.so"), str(path), "-lm"],
                                capture_output=True, text=True, timeout=300, check=True).stderr
        done = {int(m) for m in re.findall(rf"k{k}\.c:(\d+):\d+: optimized: loop vectorized",
                                           report)}
        # a loop that only fills or copies an array GCC turns into memset or memcpy
        done |= {int(m) for m in re.findall(rf"k{k}\.c:(\d+):\d+: .*__builtin_mem(?:set|cpy) ",
                                            report)}
        lines = src.splitlines()
        loops = [i + 2 for i, line in enumerate(lines) if "omp simd" in line]
        # GCC names the loop's line or its first statement's (a split row: `j` in between)
        scalar = [lines[n - 1].strip() for n in loops if not {n, n + 1, n + 2} & done]
        assert not scalar, (scalar, src[-3000:])


# -- NaN and the infinities: ATen's results, where a kernel meets them ---------------------------
SPECIAL = ("[float('nan'), float('inf'), -float('inf'), 0.0, -0.0, 1.0, -1.0, 100.0, -100.0, "
           "1e-30, 88.8, -88.8, 20.5, -20.5, 1e-5, 3.0]")
# gelu's erf form at +-inf is left out: ATen's CPU kernel gives NaN there, its CUDA one +-inf
SPECIAL_OPS = [
    "torch.exp(x)", "torch.log(x)", "torch.sigmoid(x)", "torch.tanh(x)", "torch.erf(x)",
    "torch.log1p(x)", "torch.expm1(x)", "F.softplus(x)", "F.mish(x)", "F.silu(x)", "F.elu(x)",
    "F.selu(x)", "F.celu(x)", "F.relu6(x)", "F.hardsigmoid(x)", "F.hardswish(x)",
    "F.logsigmoid(x)", "torch.maximum(x, x.new_tensor(1.0))", "torch.minimum(x.new_tensor(1.0), x)",
    "torch.fmax(x, x.new_tensor(1.0))", "torch.clamp(x, 0, 6)", "torch.relu(x)",
    "F.leaky_relu(x)", "F.hardtanh(x)", "torch.rsqrt(x)", "F.softsign(x)", "F.tanhshrink(x)",
    "F.softshrink(x)", "F.hardshrink(x)", "torch.sign(x)", "F.gelu(x, approximate='tanh')",
]


@pytest.mark.parametrize("device", DEVICES)
def test_pointwise_kernels_give_atens_nans_and_infinities(device, settings):
    """A NaN goes through every op as it does in ATen (a clamp of exp's argument, a max that
    skips it, a band test written the other way round each lost it), and the infinities
    and signed zeros come out as ATen's do."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return ({", ".join(SPECIAL_OPS)},)
        def get_inputs():
            return [torch.tensor({SPECIAL}).repeat(8, 1)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings.replace(device=device), device=device)
    assert cand.kernels and plan.blockers() == [], plan.blockers()
    want, got, _, _ = run_both(problem, cand, device=device)
    for op, g, w in zip(SPECIAL_OPS, got, want):
        torch.testing.assert_close(g, w, equal_nan=True, atol=1e-6, rtol=1e-5, msg=op)


@pytest.mark.parametrize("device", DEVICES)
# rows of a few elements, of many, and of enough to be summed in double on the CPU
@pytest.mark.parametrize("cols", [12, 3000, 5000])
@pytest.mark.parametrize("body", ["torch.softmax(x, dim=-1)", "torch.log_softmax(x, dim=-1)",
                                  "torch.logsumexp(x, dim=-1)"])
def test_row_softmax_gives_atens_nans(body, cols, device, settings):
    """Rows of one value each (NaN, +-inf, zeros, numbers) and rows of them all mixed: a
    row of NaN is NaN, of -inf is NaN (softmax) or -inf (logsumexp), a row holding +inf and
    no NaN is NaN (softmax) or +inf (logsumexp)."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return {body}
        def get_inputs():
            v = torch.tensor({SPECIAL})
            n = {cols}
            # the mixed rows all hold NaN (the last of them once, at its end); the last row
            # holds +inf, -inf and numbers, no NaN
            mixed = v.repeat(3, n // 16 + 1)[:, :n].clone()
            mixed[2, :-1] = mixed[2, :-1].nan_to_num(0.5, posinf=float('inf'))
            mixed[2, -1] = float('nan')
            return [torch.cat([v.view(-1, 1).repeat(1, n), mixed,
                               v[1:].repeat(n // 15 + 1)[:n].view(1, n)])]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings.replace(device=device), device=device)
    assert cand.kernels
    want, got, _, _ = run_both(problem, cand, device=device)
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_over_a_middle_dim_gives_atens_nans(device, settings):
    """Over dim 1 of [2, 16, 8]: the C kernel's rows side by side in vector lanes, NaN and
    the infinities among them."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return (torch.softmax(x, 1), torch.log_softmax(x, 1), torch.logsumexp(x, 1))
        def get_inputs():
            v = torch.tensor({SPECIAL})
            x = torch.randn(2, 16, 8)
            x[0, :, 0] = v                            # all of them: NaN
            x[0, :, 1] = torch.cat([v[1:], torch.ones(1)])   # +inf, -inf and numbers
            x[0, :, 2] = float('-inf')
            x[1, 3, 3] = float('inf')
            x[1, 5, 4] = float('nan')
            return [x]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings.replace(device=device), device=device)
    assert cand.kernels and plan.blockers() == [], plan.blockers()
    want, got, _, _ = run_both(problem, cand, device=device)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_rows_with_infinities_give_atens_loss(device, settings):
    """ATen's loss is log_softmax's: NaN for a row holding +inf (wherever the target is) or
    NaN, or of -inf only; a -inf elsewhere in a row adds nothing. The kernel's logsumexp
    of a row holding +inf is +inf, so the loss must not read it as a number."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x, t):
                # one loss a row: a mean over rows would make every one NaN
                return tuple(F.cross_entropy(x[i:i + 1], t[i:i + 1]) for i in range(6))
        def get_inputs():
            inf, nan = float('inf'), float('nan')
            x = torch.tensor([[1.0, inf, 2.0, 0.5], [inf, 1.0, 2.0, 0.5], [1.0, -inf, 2.0, 0.5],
                              [-inf, -inf, -inf, -inf], [1.0, nan, 2.0, 0.5],
                              [1.0, 3.0, 2.0, 0.5]])
            return [x, torch.tensor([0, 0, 2, 1, 0, 3])]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings.replace(device=device), device=device)
    # each loss's row kernel (a batch of one's count of rows, an int64 sum, stays in PyTorch)
    assert len([t for t in plan.tasks if t.kind == "reduction_fusion"]) >= 6
    want, got, _, _ = run_both(problem, cand, device=device)
    assert [bool(w.isnan()) for w in want] == [True, True, False, True, True, False]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_log_softmax_of_large_logits_keeps_the_small_terms(device, settings):
    """log_softmax is (x - max) - log(sum): with logits of thousands, x - (max + log(sum))
    rounds max + log(sum) to ulp(max) (about 1e-4) first, and the largest logit's result, a
    small number, came out that far from ATen's."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.log_softmax(x, dim=1)
        def get_inputs():
            g = torch.Generator().manual_seed(0)
            return [torch.randn(64, 200, generator=g) * 2000]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings.replace(device=device), device=device)
    assert cand.kernels
    want, got, _, _ = run_both(problem, cand, device=device)
    top = want.argmax(1, keepdim=True)   # the terms near 0, where the rounding showed
    torch.testing.assert_close(got.gather(1, top), want.gather(1, top), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mish_is_one_exp_and_matches_aten_across_its_range(device, dtype, settings):
    """Mish as x * n / (n + 2), n = e^x (e^x + 2), against ATen's x * tanh(log1p(e^x)) from
    far below zero, where it is x * e^x, through 20, where tanh(softplus(x)) becomes 1."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return F.mish(x)
        def get_inputs():
            return [torch.linspace(-60, 60, 240003, dtype=torch.{dtype}).reshape(3, -1)]
        def get_init_inputs():
            return []
    """)
    _, _, cand = generate(problem, settings.replace(device=device), device=device)
    code = "\n".join(k.code for k in cand.kernels)
    body = code[code.rindex("void "):]   # the kernel, after the prelude
    assert "sc_mish(" in body and "sc_softplus(" not in body and "sc_tanh(" not in body
    want, got, _, _ = run_both(problem, cand, device=device)
    tol = 1e-6 if dtype == "float32" else 1e-13
    torch.testing.assert_close(got, want, atol=1e-30, rtol=tol)
