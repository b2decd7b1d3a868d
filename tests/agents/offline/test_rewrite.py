"""Graph rewrites before planning (``rewrite.py``): the rewritten program matches eager."""

from __future__ import annotations

import pytest
import torch

from stitchcuda_lab.agents.offline.rewrite import rewrite

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
