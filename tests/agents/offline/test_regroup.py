"""Views that only regroup dims, moved out of a pointwise chain's way (``regroup.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from stitchcuda_lab.agents.offline import OfflinePlanner
from stitchcuda_lab.agents.offline.regroup import groups, regrouped
from stitchcuda_lab.agents.offline.rewrite import rewrite
from stitchcuda_lab.graph import analyse

from .conftest import assert_close, generate, make_problem, run_both


def test_runs_of_dims_that_merge_and_split():
    assert groups([2, 3, 4, 5], [2, 12, 5]) == [([2], [2]), ([3, 4], [12]), ([5], [5])]
    assert groups([2, 60], [2, 3, 4, 5]) == [([2], [2]), ([60], [3, 4, 5])]
    assert groups([2, 1, 6], [2, 6]) == [([2], [2]), ([1], []), ([6], [6])]
    assert groups([2, 6], [2, 6, 1]) == [([2], [2]), ([6], [6]), ([], [1])]
    assert groups([2, 3], [3, 2]) is None          # a reshape, not a regrouping
    assert groups([4, 3, 5], [2, 30]) is None      # 4 straddles 2 | 30
    # a broadcast operand: each run whole or all ones
    assert regrouped([64, 1, 1, 1], [32, 64, 32, 64, 64], [32, 64, 131072]) == [1, 64, 1]
    assert regrouped([1, 64, 1], [32, 64, 131072], [32, 64, 32, 64, 64]) == [1, 64, 1, 1, 1]
    assert regrouped([32, 1, 1], [4, 32, 8, 8], [4, 32, 64]) == [1, 32, 1]
    assert regrouped([8, 1], [4, 32, 8, 8], [4, 32, 64]) is None   # half of a run
    assert regrouped([5, 1], [2, 5, 3], [10, 3]) is None


def _softmax_over_pixels(scale_shape: str, extra: str = "") -> object:
    return make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv3d(3, 4, 3, padding=1)
                self.scale = nn.Parameter(torch.rand({scale_shape}) + 0.5)
            def forward(self, x):
                y = torch.clamp(self.conv(x), 0.0, 1.0)
                b, c, d, h, w = y.shape
                y = torch.softmax(y.view(b, c, -1), dim=2).view(b, c, d, h, w)
                return y * self.scale{extra}
        def get_inputs():
            return [torch.randn(2, 3, 4, 5, 6)]
        def get_init_inputs():
            return []
    """, name="softmax_over_pixels")


def _tasks_with(plan, *ops):
    return [t for t in plan.tasks if t.kind != "keep" and any(o in t.ops for o in ops)]


def test_a_softmax_over_a_view_fuses_with_the_chain_before_and_after_it(settings, judge):
    """KernelBench's ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply: the clamp is computed in
    the view's shape and the scale in the softmax's, one kernel for the three (it was three,
    each reading and writing the whole tensor), as eager gives it."""
    problem = _softmax_over_pixels("1, 4, 1, 1, 1")
    graph, plan, cand = generate(problem, settings)
    fused = _tasks_with(plan, "clamp", "softmax", "mul")
    assert len(fused) == 1 and {"clamp", "softmax", "mul"} <= set(fused[0].ops), plan.tasks
    g = rewrite(graph)
    assert g.node("mul").shape == [2, 4, 120] and g.node("clamp").shape == [2, 4, 120]
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)
    assert got.shape == want.shape == (2, 4, 4, 5, 6)
    assert judge(problem, cand).status == "pass"


@pytest.mark.parametrize("scale_shape,extra,why", [
    ("1, 1, 4, 1, 1", "", "the scale varies along the depth, merged with the pixels"),
    ("1, 4, 1, 1, 1", ", y", "the softmax's viewed result is returned as well"),
])
def test_a_view_stays_where_an_operand_or_a_reader_needs_its_shape(scale_shape, extra, why,
                                                                    settings):
    """Where the scale cannot be written in the softmax's shape it stays after the view, and
    where the view's result is read as it is, the chain after it is left: still eager's."""
    problem = _softmax_over_pixels(scale_shape, extra)
    graph, plan, cand = generate(problem, settings)
    assert len(_tasks_with(plan, "clamp", "softmax")) == 1, why   # the hoist still holds
    assert not any("mul" in t.ops and "softmax" in t.ops for t in plan.tasks), why
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("body,shape,node", [
    # returned as it is too: computing it in the view's shape would change what the forward
    # returns; it stays, and so does the view
    ("y = torch.relu(x) * 2.0\n                return torch.softmax(y.view(2, 3, -1), dim=2), y",
     "(2, 3, 4, 5)", "mul"),
    # [2, 4, 3, 5] as [2, 5, 12]: no run of one dims is a run of the other's
    ("return torch.softmax(torch.tanh(x).reshape(2, 5, 12), dim=1) * 3.0", "(2, 4, 3, 5)",
     "tanh"),
], ids=["read-in-its-own-shape", "not-a-regrouping"])
def test_a_chain_stays_where_moving_the_view_would_change_it(body, shape, node, settings):
    """A chain read in its own shape is not hoisted; a reshape that is not a regrouping of
    runs of dims is left: the chain keeps the input's shape, and eager's values."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def forward(self, x):
                {body}
        def get_inputs():
            return [torch.randn{shape}]
        def get_init_inputs():
            return []
    """)
    g = rewrite(analyse(problem, profile=False))
    assert g.node(node).shape == [int(d) for d in shape.strip("()").split(", ")]
    _, _, cand = generate(problem, settings)
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("body,together", [
    # a view into the softmax's shape: the chain after it fuses with the softmax there
    ("torch.softmax(torch.relu(self.conv(x).view(2, 4, -1)) * 2.0, dim=2)",
     ("relu", "mul", "softmax")),
    # a max pool lifted to a view of the convolution (rewrite._pool_epilogue): its chain
    # stays in the lifted shape, one kernel with the pool
    ("F.max_pool2d(torch.relu(self.conv(x) - 0.5), 2)", ("sub", "relu", ("amax", "max_pool"))),
], ids=["into-a-softmax", "a-pool's-lifted-view"])
def test_a_view_of_the_library_output_keeps_the_chain_where_it_fuses(body, together, settings):
    """The chain after a view of the convolution stays in the view's shape (the library's
    output has no kernel of ours to join), planned for the CPU and for the GPU."""
    problem = make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(20, 4, 3, padding=1)
            def forward(self, x):
                return {body}
        def get_inputs():
            return [torch.randn(2, 20, 6, 8)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings)
    gpu = dataclasses.replace(analyse(problem, profile=False), device="cuda")
    for p in (plan, OfflinePlanner().plan(problem, gpu, settings)):
        tasks = [t for t in p.tasks if t.kind != "keep"]
        assert any(all(any(o.startswith(name) for o in t.ops) for name in together)
                   for t in tasks), [t.ops for t in tasks]   # (startswith takes a tuple too)
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


def test_a_softmax_over_flattened_pixels_fuses_as_over_a_view(settings):
    """``flatten(2)`` and ``unflatten(2, ...)`` regroup dims as ``view`` does."""
    problem = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                y = torch.softmax(torch.relu(x).flatten(2), dim=2).unflatten(2, (4, 5))
                return y * 2.0
        def get_inputs():
            return [torch.randn(2, 3, 4, 5)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings)
    assert _tasks_with(plan, "relu", "softmax", "mul") and len(
        _tasks_with(plan, "relu", "softmax", "mul")) == 1, plan.tasks
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)
