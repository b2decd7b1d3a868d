"""Kernels that read and write channels-last tensors where they lie (``layout.py``)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess

import pytest
import torch

from stitchcuda_lab.agents.offline import OfflineCoder
from stitchcuda_lab.agents.offline.layout import channels_last_strides

from .conftest import assert_close, generate, load_candidate, make_problem, run_both


def nhwc_candidate(problem, settings):
    graph, plan, _ = generate(problem, settings)
    return OfflineCoder().candidate(problem, graph, plan, {"program": {"channels_last": True}},
                                    iteration=1)


CONV_TANH = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.ConvTranspose2d(4, 8, 4, stride=2, padding=1)
            self.bias = nn.Parameter(torch.randn(8, 1, 1))
        def forward(self, x):
            return torch.tanh(self.conv(x) - self.bias)
    def get_inputs():
        return [torch.randn(2, 4, 5, 6)]
    def get_init_inputs():
        return []
""", name="conv_tanh")

CONV_SOFTMAX = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
        def forward(self, x, r):
            return torch.softmax(self.conv(x) * 0.5, dim=1) + r
    def get_inputs():
        return [torch.randn(2, 3, 6, 5), torch.randn(2, 16, 6, 5)]
    def get_init_inputs():
        return []
""", name="conv_softmax")

CONV_INSTANCE_NORM = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3)
            self.norm = nn.InstanceNorm2d(6, affine=True)
        def forward(self, x):
            return torch.relu(self.norm(self.conv(x))) / 2.0
    def get_inputs():
        return [torch.randn(2, 3, 9, 8)]
    def get_init_inputs():
        return []
""", name="conv_instance_norm")

CONV3D_CHAIN = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(3, 5, 3)
            self.conv2 = nn.Conv3d(5, 4, 1)
        def forward(self, x):
            y = torch.nn.functional.leaky_relu(self.conv(x), 0.1) * 1.5
            return torch.sigmoid(self.conv2(y)).mean(dim=1)
    def get_inputs():
        return [torch.randn(2, 3, 5, 6, 7)]
    def get_init_inputs():
        return []
""", name="conv3d_chain")

# the row's target element is read at an index the kernel computes (expand._gather), with the
# channel stride of the NCHW layout written into the expression
CONV_GATHER = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        def forward(self, x, t):
            y = self.conv(x)
            return torch.logsumexp(y, dim=1, keepdim=True) - torch.gather(y, 1, t)
    def get_inputs():
        return [torch.randn(2, 3, 5, 6), torch.randint(0, 8, (2, 1, 5, 6))]
    def get_init_inputs():
        return []
""", name="conv_gather")

# torch.min over the channels (values and indices), as KernelBench's ConvTranspose2d_Min_Sum
CONV_MIN = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.ConvTranspose2d(4, 48, 3, stride=2, padding=1, output_padding=1)
        def forward(self, x):
            v, i = torch.min(self.conv(x), dim=1, keepdim=True)
            return torch.nn.functional.gelu(v.sum(dim=2, keepdim=True)), i
    def get_inputs():
        return [torch.randn(2, 4, 40, 6)]   # the sum's rows: 80 long, split on the GPU
    def get_init_inputs():
        return []
""", name="conv_min")

# a mean over the depth kept with its dims, then a softmax over the channels (KernelBench's
# ConvTranspose3d_Mean_Add_Softmax)
CONV3D_DEPTH_MEAN = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(3, 8, 3, padding=1)
            self.bias = nn.Parameter(torch.randn(1, 8, 1, 1, 1))
        def forward(self, x):
            y = self.conv(x).mean(dim=2, keepdim=True) + self.bias
            return torch.tanh(torch.softmax(y, dim=1)) * 2.0
    def get_inputs():
        return [torch.randn(2, 3, 4, 6, 5)]
    def get_init_inputs():
        return []
""", name="conv3d_depth_mean")


def test_channels_last_strides_put_the_channel_innermost():
    x = torch.empty(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert channels_last_strides([2, 3, 4, 5]) == list(x.stride())
    y = torch.empty(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d)
    assert channels_last_strides([2, 3, 4, 5, 6]) == list(y.stride())


@pytest.mark.parametrize("problem,laid_out", [(CONV_TANH, True), (CONV_SOFTMAX, True),
                                              (CONV3D_CHAIN, True), (CONV_INSTANCE_NORM, False)],
                         ids=["pointwise", "softmax-over-channels", "conv3d-between-kernels",
                              "instance-norm-keeps-nchw"])
def test_kernels_after_a_channels_last_convolution_read_it_in_place_and_match_eager(
        problem, laid_out, settings):
    """Pointwise kernels and row kernels over the channels read a channels-last convolution's
    output where it lies; a norm over H and W keeps its rows NCHW (a block per row), copied."""
    cand = nhwc_candidate(problem, settings)
    src = cand.module_source()
    conv_out = [line for line in src.splitlines()
                if " = torch.ops.aten.conv" in line or " = torch.ops.aten.convolution" in line]
    assert conv_out and not any(line.rstrip().endswith(".contiguous()") for line in conv_out)
    assert ("read and write channels-last" in cand.notes) is laid_out
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


def test_a_kernel_that_gathers_along_the_channels_keeps_nchw(settings):
    """A gather's index math is written with the operand's NCHW stride when it is lowered:
    read channels-last, it picked other elements (and read past the tensor)."""
    cand = nhwc_candidate(CONV_GATHER, settings)
    assert any("gather" in c for c in cand.replaced), cand.replaced
    want, got, _, _ = run_both(CONV_GATHER, cand)
    assert_close(got, want)
    assert "read and write channels-last" not in cand.notes


def test_a_laid_out_kernel_writes_its_output_channels_last(settings):
    cand = nhwc_candidate(CONV_TANH, settings)
    assert "memory_format=torch.channels_last)" in cand.module_source()
    model = load_candidate(cand).ModelNew()
    with torch.no_grad():
        out = model(*CONV_TANH.make_inputs(seed=3))
    assert out.is_contiguous(memory_format=torch.channels_last)


def test_a_kernel_whose_input_is_not_channels_last_after_all_still_reads_it_right(settings):
    """The prediction of what is channels-last only picks the strides: the program converts an
    input that is not (free where it is), so a wrong guess costs a copy, never a wrong value."""
    cand = nhwc_candidate(CONV_SOFTMAX, settings)
    src = cand.module_source()
    assert ".contiguous(memory_format=torch.channels_last)" in src
    _, _, ref, model = run_both(CONV_SOFTMAX, cand)
    x, r = CONV_SOFTMAX.make_inputs(seed=1)
    with torch.no_grad():
        want = ref(x, r)
        assert_close(model(x, r), want)
        # an NHWC residual (read with its own strides, or converted first)
        assert_close(model(x, r.contiguous(memory_format=torch.channels_last)), want)
        # an NHWC input to the convolution
        assert_close(model(x.contiguous(memory_format=torch.channels_last), r), want)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_laid_out_cuda_kernels_compile_with_nvcc(settings, tmp_path):
    sources = []
    for problem in (CONV_TANH, CONV_SOFTMAX, CONV3D_CHAIN):
        graph, plan, _ = generate(problem, settings)
        gpu = dataclasses.replace(plan, device="cuda")
        for variant in ({}, {"vec": 1}, {"rows": "warp"}, {"rows": "block", "cache": True}):
            overrides = {"program": {"channels_last": True}}
            overrides.update({t.id: dict(variant) for t in gpu.tasks})
            cand = OfflineCoder().candidate(problem, graph, gpu, overrides, iteration=1)
            assert "read and write channels-last" in cand.notes, problem.name
            sources += [k.code for k in cand.kernels]
    # one file: each candidate's kernels renamed apart (they are all k0_t1, k1_t2, ...)
    src = tmp_path / "laid_out.cu"
    src.write_text("\n".join(re.sub(r"\b(k\d+_t\d+)\b", rf"\1_{i}", code)
                             for i, code in enumerate(dict.fromkeys(sources))))
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-x", "cu", str(src),
                           "-o", str(tmp_path / "laid_out.o")], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_a_laid_out_candidate_passes_the_verifier(settings, judge):
    cand = nhwc_candidate(CONV_SOFTMAX, settings)
    assert "read and write channels-last" in cand.notes
    verdict = judge(CONV_SOFTMAX, cand)
    assert verdict.status == "pass", verdict.reason


def test_a_laid_out_kernel_walks_memory_in_order_channel_innermost(settings):
    """Channels-last strides alone would be right but gather along C on every step: the dims
    are permuted so the NHWC tensors are walked contiguously (coalesced, vectorised)."""
    from stitchcuda_lab.agents.offline.lower import build_spec
    from stitchcuda_lab.agents.offline.rewrite import rewrite
    from stitchcuda_lab.graph import analyse

    _, plan, _ = generate(CONV_TANH, settings)
    graph = rewrite(analyse(CONV_TANH, device="cpu", profile=False, settings=settings))
    conv = next(n.name for n in graph.calls() if "conv" in n.target)
    members = next(t.ops for t in plan.tasks if t.kind == "gemm_epilogue")   # conv + epilogue
    plain = build_spec(graph, members, "k0")
    laid = build_spec(graph, members, "k0", nhwc={conv})
    full = [o for o in laid.operands if o.layout]
    assert full and plain.dims != laid.dims and laid.dims[-1] == 8   # C innermost
    # each channels-last operand (coalesced over the kernel's dims) is walked with stride 1
    assert all(o.strides[-1] == 1 for o in full)


def test_a_minimum_over_the_channels_with_its_indices_reads_channels_last(settings):
    """An index over one reduced dim is the position along it in either order of the dims:
    ``torch.min(x, dim=1)`` reads the convolution's NHWC output in place (it was copied to NCHW
    first), and its indices are the channels'."""
    cand = nhwc_candidate(CONV_MIN, settings)
    assert "read and write channels-last" in cand.notes
    assert not re.search(r"conv\w* = \w+\.contiguous\(\)", cand.module_source())
    want, got, _, _ = run_both(CONV_MIN, cand)
    assert_close(got, want)


def test_a_mean_over_many_short_rows_and_the_softmax_after_it_stay_channels_last(
        settings, monkeypatch):
    """A reduction not over the channels reads NHWC in place where its rows are many (a thread
    a row, neighbours on neighbouring channels), and writes its kept-dims result channels-last
    for the softmax over the channels after it; with few rows it keeps NCHW."""
    from stitchcuda_lab.agents.offline import layout

    monkeypatch.setattr(layout, "MANY_ROWS", 2 * 6 * 5 * 8)   # this problem's rows
    cand = nhwc_candidate(CONV3D_DEPTH_MEAN, settings)
    src = cand.module_source()
    assert "read and write channels-last" in cand.notes
    assert not re.search(r"= \w+\.contiguous\(\)", src), src[-3000:]
    assert src.count("memory_format=torch.channels_last_3d)") >= 3   # conv input, 2 outputs
    want, got, _, _ = run_both(CONV3D_DEPTH_MEAN, cand)
    assert_close(got, want)
    monkeypatch.setattr(layout, "MANY_ROWS", 2 * 6 * 5 * 8 + 1)
    few = nhwc_candidate(CONV3D_DEPTH_MEAN, settings).module_source()
    assert re.search(r"conv\w* = \w+\.contiguous\(\)", few)


def test_a_row_kernel_laid_out_channels_last_takes_that_layouts_row_strategy(settings):
    """The plan chose a thread a row for a minimum over NCHW channels (strided rows); laid out
    channels-last the same rows are contiguous, and a thread each would read 512-byte strides
    a lane: the kernel takes the warp a row that layout's defaults give, and says so. A knob a
    variant set stays as set."""
    from stitchcuda_lab.agents.offline import OfflinePlanner
    from stitchcuda_lab.graph import analyse

    graph = dataclasses.replace(analyse(CONV_MIN, profile=False), device="cuda")
    gpu = OfflinePlanner().plan(CONV_MIN, graph, settings)
    task = next(t for t in gpu.tasks if any(o.startswith("min") for o in t.ops))
    assert task.params["rows"] == "thread"
    # the sum over H after it (few interleaved rows) is split; a saved session's plan with
    # that default loads again (its knobs are checked then)
    from stitchcuda_lab.plan import Plan
    assert any(t.params.get("rows") == "split" for t in gpu.tasks)
    assert Plan.from_dict(json.loads(json.dumps(gpu.to_dict()))).tasks
    cand = OfflineCoder().candidate(CONV_MIN, graph, gpu, {"program": {"channels_last": True}},
                                    iteration=1)
    assert "rows=warp for the channels-last layout" in cand.notes
    assert cand.params["tasks"][task.id]["rows"] == "warp"
    assert "'rows': 'warp'" in cand.kernels[0].code
    kept = OfflineCoder().candidate(CONV_MIN, graph, gpu, {
        "program": {"channels_last": True}, task.id: {**task.params, "rows": "block"}},
        iteration=1)
    assert kept.params["tasks"][task.id]["rows"] == "block"
    # the channels-last program's own variants: a knob set back to the NCHW default (vec=1)
    # is what its kernel is built with, not re-laid again
    base = {k: dict(v) for k, v in cand.params["tasks"].items()}
    assert base["program"]["relaid"] is True
    scalar = OfflineCoder().candidate(CONV_MIN, graph, gpu, {
        **base, task.id: {**base[task.id], "vec": 1}}, iteration=2)
    assert scalar.params["tasks"][task.id]["vec"] == 1 and "'vec': 1" in scalar.kernels[0].code
    flip = [p for label, p in OfflineCoder().variants(graph, gpu, base, 1, None)
            if label.startswith("convolutions ")]
    assert flip and flip[0]["program"]["relaid"] is False
    nchw = OfflineCoder().candidate(CONV_MIN, graph, gpu, {}, iteration=1)
    assert nchw.params["tasks"][task.id]["rows"] == "thread" and "layout (the plan" \
        not in nchw.notes

# more input channels than our own dense convolution's: cuDNN's, channels-last
CONV_WIDE_INSTANCE_NORM = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(20, 6, 3)
            self.norm = nn.InstanceNorm2d(6, affine=True)
        def forward(self, x):
            return torch.relu(self.norm(self.conv(x))) / 2.0
    def get_inputs():
        return [torch.randn(2, 20, 19, 17)]
    def get_init_inputs():
        return []
""", name="conv_wide_instance_norm")


def test_a_norm_over_the_pixels_reads_channels_last_in_place_on_the_gpu(settings, tmp_path):
    """An instance norm's rows (one a channel of an image) interleave channels-last: on the
    GPU they are split among a block's warps, lanes on neighbouring channels, and read where
    the convolution wrote them (on the CPU such a row walks one core's memory strided: NCHW,
    copied, as in ``instance-norm-keeps-nchw``)."""
    from stitchcuda_lab.agents.offline import OfflinePlanner
    from stitchcuda_lab.graph import analyse

    from .conftest import cuda_compile_errors

    graph = dataclasses.replace(analyse(CONV_WIDE_INSTANCE_NORM, profile=False), device="cuda")
    plan = OfflinePlanner().plan(CONV_WIDE_INSTANCE_NORM, graph, settings)
    cand = OfflineCoder().candidate(CONV_WIDE_INSTANCE_NORM, graph, plan,
                                    {"program": {"channels_last": True}}, iteration=1)
    assert "read and write channels-last" in cand.notes and "rows=split" in cand.notes
    assert not re.search(r"conv\w* = \w+\.contiguous\(\)", cand.module_source())
    code = "\n".join(k.code for k in cand.kernels)
    assert "sc_split_reduce(" in code
    assert cuda_compile_errors({k.name: k.code for k in cand.kernels}, tmp_path) == ""


@pytest.mark.gpu
def test_laid_out_split_rows_match_eager_on_the_gpu(settings, monkeypatch):
    """The same program run: the norm's split rows, read channels-last, give eager's (cuDNN
    in fp32 for both: its TF32 kernels differ by layout)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    for problem in (CONV_WIDE_INSTANCE_NORM, CONV_MIN, CONV3D_DEPTH_MEAN):
        graph, plan, _ = generate(problem, settings.replace(device="cuda"), device="cuda")
        cand = OfflineCoder().candidate(problem, graph, plan,
                                        {"program": {"channels_last": True}}, iteration=1)
        assert "read and write channels-last" in cand.notes, problem.name
        want, got, _, _ = run_both(problem, cand, device="cuda")
        assert_close(got, want)


# pools after a convolution run channels-last (KernelBench's ConvTranspose2d_MaxPool_Hardtanh,
# Conv2d_..._MaxPool_Mish, ConvTranspose3d_AvgPool): max with padding and dilation, average
# with its padded count, 3-d, and an epilogue reading a per-channel bias and a full-size input
POOLS = {
    "max2d": ("torch.nn.functional.max_pool2d(torch.relu(y), 3, 2, 1, 2)", 2, "(2, 3, 11, 9)", ""),
    "avg2d": ("torch.nn.functional.avg_pool2d(y, 3, 2, 1) * self.b", 2, "(2, 3, 10, 7)", ""),
    "max3d": ("torch.nn.functional.max_pool3d(y, 2) + r", 3, "(2, 3, 6, 5, 8)",
              ", torch.randn(2, 40, 3, 2, 4)"),
    "avg3d": ("torch.clamp(torch.nn.functional.avg_pool3d(y, 2), -0.5, 0.5)", 3, "(2, 3, 5, 6, 4)",
              ""),
}


def _pool_problem(name):
    body, nd, shape, extra = POOLS[name]
    conv = "ConvTranspose2d" if nd == 2 else "Conv3d"
    return make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.{conv}(3, 40, 3, padding=1)
                self.b = nn.Parameter(torch.randn(40, 1, 1))
            def forward(self, x, r=None):
                y = self.conv(x)
                return {body}
        def get_inputs():
            return [torch.randn{shape}{extra}]
        def get_init_inputs():
            return []
    """, name=f"pool_{name}")


def _matches_eager_and_compiles_for_the_gpu(problem, cand, settings, tmp_path):
    """``cand`` (the CPU's channels-last program) against eager on two draws; then the GPU's
    channels-last program of ``problem``, laid out as well, its kernels compiled. Returns it."""
    from stitchcuda_lab.agents.offline import OfflinePlanner

    from .conftest import cuda_compile_errors
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, seed=seed)
        assert_close(got, want)
    graph = dataclasses.replace(generate(problem, settings)[0], device="cuda")
    plan = OfflinePlanner().plan(problem, graph, settings)
    cuda = OfflineCoder().candidate(problem, graph, plan, {"program": {"channels_last": True}},
                                    iteration=1)
    assert "read and write channels-last" in cuda.notes
    assert cuda_compile_errors({k.name: k.code for k in cuda.kernels}, tmp_path) == ""
    return cuda


@pytest.mark.parametrize("name", sorted(POOLS))
def test_a_pool_after_a_channels_last_convolution_reads_it_in_place(name, settings, tmp_path):
    """The pool walks its outputs channel innermost (neighbouring threads on neighbouring
    channels of each window tap) and writes them channels-last: no copy to NCHW before it,
    the same values as eager (C here; the CUDA kernel is the same lowering, compiled)."""
    problem = _pool_problem(name)
    cand = nhwc_candidate(problem, settings)
    pools = [k for k in cand.kernels if "pool" in k.code.split("\n{", 1)[0]]
    assert pools and all("p_f" in k.code for k in pools), [k.code[:300] for k in cand.kernels]
    assert "read and write channels-last" in cand.notes
    cuda = _matches_eager_and_compiles_for_the_gpu(problem, cand, settings, tmp_path)
    assert any("p_f" in k.code for k in cuda.kernels if k.lang == "cuda"), cuda.notes


# a pool of disjoint windows after a convolution's pointwise chain is lifted to a view of the
# convolution's output, [N, C, OH, kh, OW, kw], reduced over kh and kw (rewrite._pool_epilogue):
# KernelBench's ConvTranspose2d_MaxPool_Hardtanh_Mean and Conv2d_Subtract_HardSwish_MaxPool_Mish
LIFTED = {
    "max": ("torch.nn.functional.max_pool2d(torch.nn.functional.hardswish(y - 0.5), 2)",
            "torch.nn.functional.mish(p).mean(dim=(2, 3), keepdim=True)"),
    "avg": ("torch.nn.functional.avg_pool2d(torch.relu(y), (2, 3))", "torch.tanh(p) * 2.0"),
}


def _after_a_transposed_convolution(body: str, name: str):
    """A problem whose forward is ``y = conv_transpose(x)`` then ``body`` (lines indented
    16), on over a million pooling windows: a thread each, channels-last on a CPU too."""
    return make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.ConvTranspose2d(3, 64, 3, stride=1, padding=1)
            def forward(self, x):
                y = self.conv(x){body}
        def get_inputs():
            return [torch.randn(4, 3, 128, 192)]
        def get_init_inputs():
            return []
    """, name=name)


@pytest.mark.parametrize("name", sorted(LIFTED))
def test_a_lifted_pool_reads_the_channels_last_convolution_through_its_view(name, settings,
                                                                           tmp_path):
    """The view that splits the spatial dims is taken of the channels-last output as it lies
    (no copy to NCHW before it), the pool's rows walked channel innermost, its result written
    channels-last for the kernel after it; the same values as eager."""
    pool, after = LIFTED[name]
    problem = _after_a_transposed_convolution(f"""
                p = {pool}
                return {after}""", f"lifted_{name}")
    cand = nhwc_candidate(problem, settings)
    fwd = cand.program.split("def forward", 2)[-1]
    assert "_pool_view = torch.ops.aten.view.default(" in fwd
    # no copy to NCHW before the view (a mean over H and W after it may keep NCHW on a CPU)
    assert "conv_transpose2d = conv_transpose2d.contiguous()" not in fwd, fwd
    assert "conv_transpose2d = conv_transpose2d.contiguous(memory_format=torch.channels_last)" \
        in fwd
    pooled = next(k for k in cand.kernels if "max_pool2d" in k.code or "avg_pool2d" in k.code)
    assert "reduced: [" in pooled.code and "read and write channels-last" in cand.notes
    cuda = _matches_eager_and_compiles_for_the_gpu(problem, cand, settings, tmp_path)
    assert "conv_transpose2d = conv_transpose2d.contiguous()" not in cuda.program


def test_a_view_that_splits_a_channels_last_tensors_spatial_dims_has_its_strides():
    from stitchcuda_lab.agents.offline.layout import split_view_strides

    for shape, view in (([2, 3, 4, 6], [2, 3, 2, 2, 3, 2]), ([2, 5, 4, 6, 2], [2, 5, 2, 2, 6, 1, 2]),
                        ([1, 3, 4, 1], [1, 3, 2, 2, 1])):
        fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        x = torch.empty(shape).contiguous(memory_format=fmt)
        want = [st if d != 1 else 0 for st, d in zip(x.view(view).stride(), view)]
        got = split_view_strides(shape, view)
        assert [st if d != 1 else 0 for st, d in zip(got, view)] == want, (shape, view)
    # merging dims, splitting the channels or the batch: not a split of the spatial dims
    assert split_view_strides([2, 3, 4, 6], [2, 3, 24]) is None
    assert split_view_strides([2, 4, 4, 6], [2, 2, 2, 4, 6]) is None
    assert split_view_strides([2, 3, 4, 6], [2, 3, 4, 6]) is None


# a lifted view read by a kernel where another reader rebinds the view or its source to an
# NCHW copy first (a flatten of the convolution's output, a permute of the view itself): the
# kernel's strides are those of the channels-last layout, so its view is taken again of the
# source made channels-last (a reviewer's finding: 0.85 off eager before)
REBOUND = {
    "source flattened first": """
                f = y.view(y.shape[0], -1)
                v = torch.nn.functional.hardswish(y.view(4, 64, 64, 2, 96, 2)).amax(dim=(3, 5))
                return torch.tanh(v) * 2.0, f""",
    "source flattened after": """
                v = torch.nn.functional.hardswish(y.view(4, 64, 64, 2, 96, 2)).amax(dim=(3, 5))
                f = y.view(y.shape[0], -1)
                return torch.tanh(v) * 2.0, f""",
    "view permuted first": """
                v = y.view(4, 64, 64, 2, 96, 2)
                q = v.permute(0, 2, 1, 3, 4, 5).reshape(4, 64, -1)
                a = torch.nn.functional.hardswish(v).amax(dim=(3, 5))
                return torch.tanh(a) * 2.0, q""",
}


@pytest.mark.parametrize("name", sorted(REBOUND))
def test_a_split_view_is_read_right_whatever_else_reads_it_or_its_source(name, settings):
    problem = _after_a_transposed_convolution(REBOUND[name], "rebound")
    cand = nhwc_candidate(problem, settings)
    assert "_sv = torch.ops.aten.view.default(" in cand.program, cand.program
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)
