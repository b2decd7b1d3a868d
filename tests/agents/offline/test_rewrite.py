"""Graph rewrites before planning (``rewrite.py``): the rewritten program matches eager."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stitchcuda_lab.agents.offline.rewrite import rewrite
from stitchcuda_lab.problem import problem_from_source

from .conftest import assert_close, generate, make_problem, run_both

GEMM_SUM = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(48, 64))
        def forward(self, x):
            x = torch.matmul(x, self.weight.T)
            x = x / 2
            x = torch.sum(x, dim=1, keepdim=True)
            return x * 1.5
    def get_inputs():
        return [torch.rand(16, 64)]
    def get_init_inputs():
        return []
""", name="gemm_sum")

LINEAR_SUM = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 40)
            self.shift = nn.Parameter(torch.randn(40))
        def forward(self, x):
            y = (self.fc(x) * 0.5 - self.shift) + 3.0
            return torch.sum(y, dim=-1)
    def get_inputs():
        return [torch.randn(8, 64)]
    def get_init_inputs():
        return []
""", name="linear_sum")

GEMM_MEAN = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 40)
        def forward(self, x):
            return torch.sigmoid((self.fc(x) + 0.25).mean(dim=1, keepdim=True))
    def get_inputs():
        return [torch.randn(8, 64)]
    def get_init_inputs():
        return []
""", name="gemm_mean")

GEMM_USED_TWICE = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(32, 16)
        def forward(self, x):
            y = self.fc(x)
            return y.sum(dim=1, keepdim=True) + y.amax(dim=1, keepdim=True)
    def get_inputs():
        return [torch.randn(8, 32)]
    def get_init_inputs():
        return []
""", name="gemm_used_twice")


@pytest.mark.parametrize("problem", [GEMM_SUM, LINEAR_SUM, GEMM_MEAN],
                         ids=["matmul", "linear-bias-shift", "mean"])
def test_a_gemm_summed_over_its_features_becomes_a_gemm_against_the_summed_weights(
        problem, settings):
    graph, plan, cand = generate(problem, settings)
    g = rewrite(graph)
    assert any("its weights are summed first" in note for note in plan.notes)
    assert any("algebraic-rewrites" in t.refs for t in plan.tasks)
    gemm = next(n for n in g.calls() if n.opname in ("matmul", "linear"))
    assert gemm.shape[-1] == 1                          # one column, not N
    assert any(n.name.endswith("_wsum") for n in g.calls())
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want, atol=1e-4, rtol=1e-4)
    # in float64 the rewrite is the same function to rounding: nothing was dropped
    torch.manual_seed(0)
    x = torch.randn(4, 64, dtype=torch.float64)
    ns = problem.namespace()
    ref = ns["Model"]().double()
    if problem is GEMM_SUM:
        w = ref.weight
        exact = (x @ w.sum(0, keepdim=True).T) / 2 * 1.5
    elif problem is GEMM_MEAN:
        w, b = ref.fc.weight, ref.fc.bias
        exact = torch.sigmoid(x @ w.mean(0, keepdim=True).T + b.mean() + 0.25)
    else:
        w, b = ref.fc.weight, ref.fc.bias
        exact = (x @ w.sum(0) + b.sum()) * 0.5 - ref.shift.sum() + 3.0 * 40
    torch.testing.assert_close(ref(x).reshape(exact.shape), exact, atol=1e-9, rtol=1e-9)


def test_a_gemm_whose_output_is_read_elsewhere_keeps_its_n_columns(settings):
    graph, _, _ = generate(GEMM_USED_TWICE, settings)
    g = rewrite(graph)
    gemm = next(n for n in g.calls() if n.opname == "linear")
    assert gemm.shape == [8, 16]
    assert not any(n.name.endswith("_wsum") for n in g.calls())


def test_a_sum_over_all_dims_leaves_the_other_rewrites_in_place(settings):
    # sum(dim=None) is exported with dims None: it must not stop the bias split and the rest
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 8)
            def forward(self, x):
                y = torch.relu(self.fc(x))
                return y + y.sum(dim=None, keepdim=True)
        def get_inputs():
            return [torch.randn(4, 16)]
        def get_init_inputs():
            return []
    """, name="sum_all")
    graph, _, cand = generate(p, settings)
    g = rewrite(graph)
    assert g is not graph and any(n.name.endswith("_bias") for n in g.calls())
    want, got, _, _ = run_both(p, cand)
    assert_close(got, want)


def test_a_shift_of_another_dtype_keeps_the_n_columns(settings):
    # an int64 vector's mean would truncate (and an fp16 one's sum overflow) in its own dtype
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(16, 12))
                self.register_buffer("v", torch.arange(12))
            def forward(self, x):
                return (x @ self.w + self.v).mean(dim=-1)
        def get_inputs():
            return [torch.randn(4, 16)]
        def get_init_inputs():
            return []
    """, name="int_shift")
    graph, _, cand = generate(p, settings)
    assert not any(n.name.endswith("_wsum") for n in rewrite(graph).calls())
    want, got, _, _ = run_both(p, cand)
    assert_close(got, want)


DEAD_BRANCH = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(32, 32))
            self.register_buffer("calls", torch.zeros(()))
        def forward(self, x):
            unused = torch.softmax(x @ self.w, dim=-1).exp()   # computed, never returned
            self.calls.add_(1)                                  # an effect: it stays
            values, _indices = torch.max(x, dim=1)              # only one item of a tuple used
            return torch.relu(x) * 2 + values[:, None]
    def get_inputs():
        return [torch.randn(16, 32)]
    def get_init_inputs():
        return []
""", name="dead_branch")


def test_ops_whose_results_reach_no_output_are_dropped_and_effects_stay(settings):
    graph, _plan, cand = generate(DEAD_BRANCH, settings)
    before = {n.opname for n in graph.calls()}
    after = {n.opname for n in rewrite(graph).calls()}
    assert {"softmax", "exp"} <= before and {"_softmax", "softmax", "exp", "matmul", "mm"} \
        .isdisjoint(after), after
    assert "add_" in after and "relu" in after and "max" in after
    src = cand.module_source()
    assert "softmax" not in src.split("def forward(self, x):")[-1]
    want, got, ref, new = run_both(DEAD_BRANCH, cand)
    assert_close(got, want)
    assert float(ref.calls) == float(new.calls) == 1.0     # the in-place update ran once


def test_a_dead_random_draw_stays_so_later_draws_match():
    from stitchcuda_lab.agents.offline.rewrite import _drop_dead
    from stitchcuda_lab.graph import Graph, Node

    def call(name, target, *refs):
        return Node(name=name, op="call_function", target=target, op_class="pointwise",
                    args=[{"node": r} for r in refs], shape=[4], dtype="torch.float32")
    g = Graph(nodes=[Node(name="x", op="placeholder", target="", op_class="input", shape=[4]),
                     call("noise", "aten.rand_like.default", "x"),
                     call("scaled", "aten.mul.Tensor", "noise", "x"),     # dead, no effect
                     call("slopes", "aten.rrelu.default", "x"),            # training: draws
                     call("leaky", "aten.rrelu.default", "x"),             # eval: does not
                     call("y", "aten.relu.default", "x")],
              outputs=[{"node": "y"}], capture="torch.export")
    g.node("slopes").args += [0.125, 1 / 3, True]
    g.node("leaky").args += [0.125, 1 / 3, False]
    _drop_dead(g)
    assert [n.name for n in g.nodes] == ["x", "noise", "slopes", "y"]


def test_a_global_max_pool_is_an_amax_unless_its_indices_are_read(settings):
    values_only = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(F.adaptive_max_pool2d(x, 1))
        def get_inputs():
            return [torch.randn(2, 4, 8, 8)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(values_only, settings)
    g = rewrite(graph)
    assert [n.opname for n in g.calls()] == ["amax", "relu"]
    assert not cand.kept and len(cand.kernels) == 1
    want, got, _, _ = run_both(values_only, cand)
    assert_close(got, want)
    with_indices = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                v, i = F.adaptive_max_pool2d(x, 1, return_indices=True)
                return v * i.float()
        def get_inputs():
            return [torch.randn(2, 4, 8, 8)]
        def get_init_inputs():
            return []
    """)
    graph, _, _ = generate(with_indices, settings)
    assert "adaptive_max_pool2d" in [n.opname for n in rewrite(graph).calls()]


def _one_input(body: str, shape: str):
    """A problem whose forward returns ``body`` of one input ``x`` of ``shape`` (randn)."""
    return make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                return {body}
        def get_inputs():
            return [torch.randn{shape}]
        def get_init_inputs():
            return []
    """)


@pytest.mark.parametrize("body, shape", [
    ("x / torch.sum(torch.abs(x), dim=1, keepdim=True)", "(4, 1 << 18)"),     # L1 norm of rows
    ("torch.mean(torch.relu(x), dim=(1, 2))", "(2, 512, 1024)"),             # a suffix of two
    ("torch.amax(x * 2.0, dim=-1, keepdim=True)", "(3, 1 << 18)"),
    ("torch.sum(x * x)", "(1 << 19,)"),                                       # one row
    ("x / torch.norm(x, p='fro')", "(2, 4, 256, 256)"),                      # Frobenius: one row
    ("torch.linalg.vector_norm(x, ord=3, dim=-1)", "(3, 1 << 18)"),
    ("torch.linalg.vector_norm(x, ord=float('inf'), dim=-1, keepdim=True)", "(3, 1 << 18)"),
])
def test_few_long_rows_are_reduced_in_parts(body, shape, settings):
    """One block per row leaves the H200's SMs idle where rows are fewer than SMs (and one
    core per row a many-core CPU's cores): each row is cut into parts reduced side by side,
    then the parts reduced. The same numbers, within float summation order."""
    import dataclasses

    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    problem = _one_input(body, shape)
    graph, _, cpu_cand = generate(problem, settings)
    assert len([n for n in rewrite(graph).calls() if n.name.endswith("_parts")]) == 1
    want, got, _, _ = run_both(problem, cpu_cand)
    assert_close(got, want)
    cuda = dataclasses.replace(graph, device="cuda")
    g = rewrite(cuda)
    parts = [n for n in g.calls() if n.name.endswith("_parts")]
    assert len(parts) == 1 and parts[0].shape[-1] >= 2
    plan = OfflinePlanner().plan(problem, cuda, settings)
    plan.device = "cpu"   # the same split program, in C, to run here
    cand = OfflineCoder().candidate(problem, cuda, plan, {})
    assert cand.kernels and not [k for k in cand.kept
                                 if any(op in k for op in ("sum", "amax", "mean", "norm"))]
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


def test_many_rows_or_short_ones_are_left_whole(settings):
    import dataclasses
    for body, shape in (("torch.sum(x, dim=1)", "(256, 1 << 12)"),        # rows enough
                        ("torch.sum(x, dim=1)", "(4, 1 << 12)"),          # short rows
                        ("torch.sum(x, dim=0)", "(1 << 18, 4)"),          # not a suffix
                        ("torch.linalg.vector_norm(x, ord=0, dim=-1)", "(3, 1 << 18)")):  # counts
        graph, _, _ = generate(_one_input(body, shape), settings)
        for g in (rewrite(graph), rewrite(dataclasses.replace(graph, device="cuda"))):
            assert not any(n.name.endswith("_parts") for n in g.calls()), body
    # a CPU core per row: rows fewer than the H200's SMs but more than CPU_SPLIT_ROWS_BELOW
    graph, _, _ = generate(_one_input("torch.sum(x, dim=1)", "(32, 1 << 18)"), settings)
    assert not any(n.name.endswith("_parts") for n in rewrite(graph).calls())
    assert any(n.name.endswith("_parts")
               for n in rewrite(dataclasses.replace(graph, device="cuda")).calls())


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc is not installed")
def test_the_kernels_of_rows_reduced_in_parts_compile_for_the_gpu(settings, tmp_path):
    import dataclasses
    import subprocess

    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return x / torch.sum(torch.abs(x), dim=1, keepdim=True) + torch.amax(x) \
                    + F.layer_norm(x, (1 << 18,))
        def get_inputs():
            return [torch.randn(4, 1 << 18)]
        def get_init_inputs():
            return []
    """)
    graph, _, _ = generate(problem, settings)
    cuda = dataclasses.replace(graph, device="cuda")
    plan = OfflinePlanner().plan(problem, cuda, settings)
    plan.device = "cuda"
    cand = OfflineCoder().candidate(problem, cuda, plan, {})
    split = rewrite(cuda).calls()
    assert len([n for n in split if n.name.endswith("_parts")]) == 2
    assert "var_mean" in [n.opname for n in split]
    assert {k.lang for k in cand.kernels} == {"cuda"} and len(cand.kernels) >= 3
    src = tmp_path / "k.cu"
    src.write_text("\n".join(k.code for k in cand.kernels))
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", "-x", "cu", str(src),
                           "-o", str(tmp_path / "k.o")], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.parametrize("affine", [True, False])
def test_a_layer_norm_over_few_long_rows_is_computed_in_parts_on_the_gpu(affine, settings):
    """KernelBench's LayerNorm normalises 16 rows of 4M elements: one block per row ran at
    half of Inductor's speed. Each part's mean and variance side by side, then the row's
    (the mean of the variances plus the variance of the means), then one pointwise pass."""
    import dataclasses

    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    problem = make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln = nn.LayerNorm((16, 128, 128), elementwise_affine={affine})
                if {affine}:
                    with torch.no_grad():
                        self.ln.weight.uniform_(0.5, 1.5)
                        self.ln.bias.uniform_(-0.5, 0.5)
            def forward(self, x):
                return self.ln(x)
        def get_inputs():
            return [torch.randn(3, 16, 128, 128) * 2.0 + 5.0]
        def get_init_inputs():
            return []
    """)
    graph, _, _ = generate(problem, settings)
    cuda = dataclasses.replace(graph, device="cuda")
    assert "layer_norm" in [n.opname for n in rewrite(graph).calls()]         # CPU: as is
    ops = [n.opname for n in rewrite(cuda).calls()]
    assert "layer_norm" not in ops and "var_mean" in ops
    plan = OfflinePlanner().plan(problem, cuda, settings)
    plan.device = "cpu"   # the same program, in C, to run here
    cand = OfflineCoder().candidate(problem, cuda, plan, {})
    assert cand.kernels and not [k for k in cand.kept if "norm" in k or "var" in k]
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("body", [
    "torch.diag(a) @ b",                        # KernelBench's first form of its problem 12
    "b.t() @ torch.diag(a).t()",                # a diagonal matrix is its own transpose
    "torch.diag(a).T @ b.mT",
    "torch.matmul(torch.diag(a), b[:, 0])",     # a vector
    "torch.diag(a) @ torch.stack([b, 2 * b])",  # a batch
])
def test_a_product_with_a_diagonal_matrix_is_a_broadcast_multiply(body, settings):
    """``diag(v) @ B`` made an N x N matrix and an N^3 GEMM for N^2 products: a broadcast
    multiply, the same numbers (each sum was one product plus zeros)."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, a, b):
                return {body}
        def get_inputs():
            return [torch.randn(48), torch.randn(48, 48)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings)
    ops = [n.opname for n in rewrite(graph).calls()]
    assert "diag" not in ops and "matmul" not in ops and "mm" not in ops, ops
    from stitchcuda_lab import aten
    assert cand.kernels and plan.blockers() == []
    assert all(aten.op_class(k) == "cheap" for k in cand.kept), cand.kept   # views, a stack
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want, atol=0, rtol=0)


def test_a_product_with_an_off_diagonal_matrix_stays_a_product(settings):
    graph, _, _ = generate(make_problem("""
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.diag(a, 1) @ b
        def get_inputs():
            return [torch.randn(47), torch.randn(48, 48)]
        def get_init_inputs():
            return []
    """), settings)
    assert "matmul" in [n.opname for n in rewrite(graph).calls()]


OVER_ONE = make_problem("""
    class Model(nn.Module):
        def forward(self, x):
            m = torch.amax(x * 2.0, dim=1, keepdim=True)
            inner = torch.logsumexp(torch.relu(m), dim=1, keepdim=True) - 1.0
            wide = torch.sum(x, dim=[1, 2], keepdim=True)               # dim 2 is not of size 1
            return (inner * 3.0, torch.sum(m, dim=-3), torch.mean(x[:, :1], dim=1),
                    torch.prod(m, dim=1, keepdim=True), wide,
                    torch.max(m, dim=1)[0] + 1.0,                      # values only
                    torch.min(m, dim=1)[1].float())                    # its indices read
    def get_inputs():
        return [torch.randn(4, 16, 10, 12)]
    def get_init_inputs():
        return []
""", name="over_one")


def test_a_reduction_over_dims_of_size_one_is_its_input(settings, judge):
    graph, plan, cand = generate(OVER_ONE, settings)
    g = rewrite(graph)
    ops = [n.opname for n in g.calls()]
    # each is x + 0.0 or x * 1.0 of the row values (a new tensor), fused into the amax's kernel
    assert not {"logsumexp", "prod", "mean", "max"} & set(ops), ops
    assert ops.count("sum") == 1          # the one over a dim of size 10
    assert ops.count("amax") == 1 and ops.count("min") == 1   # a min whose indices are read stays
    assert all(b.startswith("min") for b in plan.blockers()), plan.blockers()
    want, got, _, _ = run_both(OVER_ONE, cand)
    assert_close(got, want)
    assert [tuple(t.shape) for t in got] == [(4, 1, 10, 12), (4, 10, 12), (4, 10, 12),
                                             (4, 1, 10, 12), (4, 1, 1, 12), (4, 10, 12),
                                             (4, 10, 12)]
    for a in got:
        assert all(a.data_ptr() != b.data_ptr() for b in got if b is not a)
    verdict = judge(OVER_ONE, cand)
    assert verdict.status == "pass", verdict.reason


LOSSES = problem_from_source(
    (Path(__file__).resolve().parents[2] / "fixtures" / "coverage" /
     "loss_whole_tensor_in_parts.py").read_text(), name="losses")


def test_a_whole_tensor_reduction_is_cut_in_parts_with_the_chain_before_it(settings, judge):
    """A loss's mean over 196608 elements (past what one kernel reduces whole): the
    pointwise chain before it takes the parts' shape, its inputs viewed in it (a broadcast
    one too), so one kernel reads the inputs and writes the parts' sums; a second adds them."""
    graph, plan, cand = generate(LOSSES, settings)
    g = rewrite(graph)
    cuts = {n.name: n.shape for n in g.calls() if "_cut" in n.name}
    assert cuts == {"predictions_cut": [32, 12, 512], "targets_cut": [32, 12, 512],
                    "predictions_cut_1": [32, 12, 512], "labels_cut": [1, 1, 512]}, cuts
    assert {n.name: n.shape for n in g.calls() if n.opname in ("sub", "clamp")} == {
        "sub": [32, 12, 512], "clamp": [32, 12, 512]}
    assert plan.blockers() == [], plan.blockers()
    assert len(cand.kernels) == 4, [k.name for k in cand.kernels]   # each loss: parts, mean
    assert [k for k in cand.kept if "mean" in k or "sum" in k] == []
    want, got, _, _ = run_both(LOSSES, cand)
    assert_close(got, want)
    verdict = judge(LOSSES, cand)
    assert verdict.status == "pass", verdict.reason


def test_a_link_of_the_chain_read_elsewhere_is_written_whole_and_read_as_an_input(settings):
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, a, b):
                d = a - b
                return d, torch.sum(d * d)
        def get_inputs():
            return [torch.randn(300, 700), torch.randn(300, 700)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings)
    g = rewrite(graph)
    # d is written whole (it is returned) and read as the chain's input: d * d and the parts'
    # sums in one kernel
    assert {n.name: n.shape for n in g.calls() if "_cut" in n.name or n.opname == "sub"} == {
        "sub": [300, 700], "sub_cut": [16, 13125]}   # 16 parts do not divide 300: flattened
    assert [n.shape for n in g.calls() if n.opname == "mul"] == [[16, 13125]]
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("body, shape", [
    ("torch.sum(x, dim=1).unsqueeze(0).view(-1)", "(64, 1)"),          # returned through views
    ("torch.sum(x, dim=1).unfold(1, 4, 4)", "(8, 1, 16)"),              # through an unfold
    ("x.expand(64, 1, 16).sum(dim=1) * 2.0", "(1, 1, 16)"),             # a strided input
    ("torch.amax(x, 1, keepdim=True).permute(2, 1, 0).sum(dim=1) * 2.0", "(4, 8, 16)"),
    ("torch.sum(x.mul_(1.0), dim=1) + x.mul_(2.0)[:, 0]", "(8, 1, 16)"),  # x written after
    ("1.0 / torch.sum(-torch.relu(x), dim=1)", "(8, 1, 16)"),           # -0.0 summed is +0.0
])
def test_a_size_one_reduction_is_a_new_tensor_of_the_same_bits(body, shape, settings):
    problem = _one_input(body, shape)
    graph, _, cand = generate(problem, settings)
    assert "sum" not in [n.opname for n in rewrite(graph).calls()]
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)
    assert [torch.signbit(t).tolist() for t in got] == [torch.signbit(t).tolist() for t in want]


@pytest.mark.parametrize("body, left", [
    ("(torch.logsumexp(x, 1, keepdim=True) - x[:, :1]).sum()", "logsumexp"),
    ("torch.sum(x, dim=1, keepdim=True).mean() * 2.0", "sum"),
    ("torch.amax(torch.amax(x, 1, keepdim=True)) - 1.0", "amax"),
])
def test_a_whole_reduction_of_one_element_joins_the_kernel_before_it(body, left, settings):
    """Over every dim of a value holding one element (a batch of one's loss, the [1, 1] a
    keepdim reduction leaves): its input, as x + 0.0 or x * 1.0 viewed as a 0-d tensor. It
    had stayed in PyTorch: "input is not per-element" (its input is a row value)."""
    problem = _one_input(body, "(1, 10)")
    graph, plan, cand = generate(problem, settings)
    assert plan.blockers() == [], plan.blockers()
    ops = [n.opname for n in rewrite(graph).calls()]
    assert ops.count(left) == 1 and len(
        [o for o in ops if o in ("sum", "mean", "amax", "logsumexp")]) == 1, ops   # the row's
    want, got, _, _ = run_both(problem, cand)
    assert got.shape == want.shape == ()
    assert_close(got, want)


@pytest.mark.parametrize("body", [
    "torch.softmax(torch.mean(x, dim=1, keepdim=True), dim=1) * 3.0",
    "torch.log_softmax(torch.sum(x * 2.0, dim=-1, keepdim=True), dim=-1) - 1.0",
    "F.softmax(torch.amax(x, dim=2, keepdim=True) / x.new_tensor(0.0), dim=2)",   # inf, NaN
])
def test_a_softmax_over_a_dim_of_size_one_is_pointwise_with_atens_nans(body, settings):
    """A (log-)softmax of one element is 1 (0), NaN where the element is not finite:
    exp(x - x) and x - x give those bits, and fuse into the reduction's kernel."""
    problem = _one_input(body, "(6, 5, 7)")
    graph, plan, cand = generate(problem, settings)
    ops = [n.opname for n in rewrite(graph).calls()]
    assert not {"softmax", "_softmax", "log_softmax", "_log_softmax"} & set(ops), ops
    assert plan.blockers() == [] and len(cand.kernels) == 1
    want, got, _, _ = run_both(problem, cand)
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-6, rtol=1e-6)
    if "new_tensor" in body:   # each row's max over 0 is +-inf: its softmax is NaN
        assert got.isnan().all()


def _pooled_conv(conv: str, pool: str, shape: str):
    return make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm{len(shape.split(',')) - 2}d(8)
                self.conv = {conv}
            def forward(self, x):
                return {pool}(self.conv(torch.relu(self.bn(x))))
        def get_inputs():
            return [torch.randn{shape}]
        def get_init_inputs():
            return []
    """)


@pytest.mark.parametrize("conv, pool, shape", [
    ("nn.Conv2d(8, 16, 1, bias=False)", "nn.AvgPool2d(2, 2)", "(2, 8, 16, 16)"),  # DenseNet's
    ("nn.Conv2d(8, 12, 1, groups=4)", "nn.AvgPool2d(3, 2)", "(2, 8, 15, 13)"),     # overlapping
    ("nn.Conv3d(8, 6, 1)", "nn.AvgPool3d(2)", "(2, 8, 6, 8, 4)"),
    ("nn.Conv1d(8, 5, 1)", "nn.AvgPool1d(4, 3)", "(2, 8, 30)"),
])
def test_an_average_pool_after_a_per_pixel_convolution_runs_before_it(conv, pool, shape,
                                                                       settings):
    problem = _pooled_conv(conv, pool, shape)
    graph, _, cand = generate(problem, settings)
    ops = [n.opname for n in rewrite(graph).calls()]
    pooled = next(o for o in ops if o.startswith("avg_pool") or o in ("mean", "amax"))
    assert ops.index(pooled) < ops.index(next(o for o in ops if o.startswith("conv"))), ops
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("conv, pool", [
    ("nn.Conv2d(8, 16, 3, padding=1)", "nn.AvgPool2d(2, 2)"),                   # 3x3: not per pixel
    ("nn.Conv2d(8, 16, 1, stride=2)", "nn.AvgPool2d(2, 2)"),                    # strided
    ("nn.Conv2d(8, 16, 1)", "nn.MaxPool2d(2, 2)"),                              # not linear
    ("nn.Conv2d(8, 16, 1)", "nn.AvgPool2d(3, 2, padding=1)"),                   # not handled
    ("nn.Conv2d(8, 16, 1)", "nn.AvgPool2d(2, 2, ceil_mode=True)"),              # not handled
    ("nn.Conv2d(8, 1, 1)", "nn.AvgPool2d(2, 2)"),      # 8 pooled channels read for 1 saved
])
def test_a_pool_stays_after_a_convolution_it_is_not_moved_past(conv, pool, settings):
    problem = _pooled_conv(conv, pool, "(2, 8, 15, 15)")
    graph, _, _ = generate(problem, settings)
    ops = [n.opname for n in rewrite(graph).calls()]
    conv_at = next(i for i, o in enumerate(ops) if o.startswith("conv"))
    assert not any(o.startswith(("avg_pool", "max_pool")) for o in ops[:conv_at]), ops


def test_a_convolution_read_beside_its_pool_keeps_its_place(settings):
    problem = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 16, 1)
            def forward(self, x):
                y = self.conv(x)
                return F.avg_pool2d(y, 2) + y[:, :, ::2, ::2]
        def get_inputs():
            return [torch.randn(2, 8, 16, 16)]
        def get_init_inputs():
            return []
    """)
    graph, _, _ = generate(problem, settings)
    ops = [n.opname for n in rewrite(graph).calls()]
    assert ops.index("conv2d") < ops.index("avg_pool2d"), ops
