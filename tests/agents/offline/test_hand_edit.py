"""Refining a person's edit: variants merged into the edited kernel, never over it."""

from __future__ import annotations

import dataclasses

import pytest

from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
from stitchcuda_lab.agents.offline.hand_edit import conflict_lines, hand_edited, merge3
from stitchcuda_lab.graph import analyse
from stitchcuda_lab.jupyter.bridge import edited
from stitchcuda_lab.verdict import Verdict

from .conftest import assert_close, make_problem, run_both

CHAIN = make_problem("""
class Model(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = x * self.scale + self.bias
        y = torch.sigmoid(y) * y
        return torch.tanh(y)

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return [512, 1.7]
""", name="chain")

PASS = Verdict(status="pass", correct=True, speedup_vs_eager=2.0)


def test_merge_keeps_both_sides_when_they_touch_different_lines():
    base = "a\nb\nc\nd\ne\n"
    assert merge3(base, "a\nB\nc\nd\ne\n", "a\nb\nc\nd\nE\n") == "a\nB\nc\nd\nE\n"


def test_merge_refuses_overlapping_or_adjacent_changes():
    base = "a\nb\nc\nd\n"
    assert merge3(base, "a\nB\nc\nd\n", "a\nb\nC\nd\n") is None        # adjacent lines
    assert merge3(base, "a\nB\nc\nd\n", "a\nX\nc\nd\n") is None        # the same line
    assert conflict_lines(base, "a\nB\nc\nd\n", "a\nX\nc\nd\n") == [2]


def test_merge_takes_a_change_both_sides_made_once():
    base = "a\nb\nc\n"
    assert merge3(base, "a\nB\nc\n", "a\nB\nc\n") == "a\nB\nc\n"


@pytest.fixture
def cpu(settings):
    graph = analyse(CHAIN, device="cpu", profile=False, settings=settings)
    plan = dataclasses.replace(OfflinePlanner().plan(CHAIN, graph, settings), approved=True)
    first = OfflineCoder().code(CHAIN, graph, plan, settings, iteration=0)[0]
    return graph, plan, first


def _edit_math(c, old="sc_sigmoid(v4)", new="1.0f / (1.0f + sc_expf(-v4))"):
    k = c.kernels[0]
    assert old in k.code
    return edited(c, {k.name: k.code.replace(old, new)})


def test_refining_a_c_edit_varies_the_chunks_and_keeps_the_persons_line(cpu, settings):
    graph, plan, first = cpu
    mine = _edit_math(first)
    coder = OfflineCoder()
    variants = coder.code(CHAIN, graph, plan, settings, iteration=1, previous=mine,
                          feedback=PASS)
    assert variants and coder.why_empty == ""
    for v in variants:
        assert "1.0f / (1.0f + sc_expf(-v4))" in v.kernels[0].code     # the person's line
        assert "sc_sigmoid(v4)" not in v.kernels[0].code
        assert v.parent == mine.id and v.params["hand_edit"] == mine.id and hand_edited(v)
        assert "keeps your edit" in v.notes and "on your edit" in v.params["variant"]
    assert len({v.digest() for v in variants}) == len(variants)
    chunked = next(v for v in variants if "chunk" in v.params["variant"])
    assert chunked.kernels[0].code != mine.kernels[0].code
    want, got, _, _ = run_both(CHAIN, chunked)           # the merged kernel compiles and is right
    assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_second_round_still_keeps_the_edit(cpu, settings):
    graph, plan, first = cpu
    mine = _edit_math(first)
    coder = OfflineCoder()
    round1 = coder.code(CHAIN, graph, plan, settings, iteration=1, previous=mine, feedback=PASS)
    best = next(v for v in round1 if "chunk" in v.params["variant"])
    round2 = coder.code(CHAIN, graph, plan, settings, iteration=2, previous=best, feedback=PASS)
    assert round2
    assert all("1.0f / (1.0f + sc_expf(-v4))" in v.kernels[0].code for v in round2)
    assert all(v.params["hand_edit"] == mine.id for v in round2)


def test_an_edit_of_the_lines_every_variant_changes_is_not_refined_and_says_why(cpu, settings):
    graph, plan, first = cpu
    k = first.kernels[0]
    lines = k.code.splitlines()
    at = next(i for i, ln in enumerate(lines) if "for (long long blk" in ln)
    lines[at - 1] = "    #pragma omp parallel for schedule(dynamic, 1)"   # next to the chunks
    mine = edited(first, {k.name: "\n".join(lines)})
    coder = OfflineCoder()
    out = coder.code(CHAIN, graph, plan, settings, iteration=1, previous=mine, feedback=PASS)
    kept = [v for v in out if "chunk" in v.params.get("variant", "")]
    assert kept == []                                 # a chunk variant would undo the edit
    if not out:
        assert "cannot refine the hand edit" in coder.why_empty
        assert f"line(s) {at}" in coder.why_empty
    assert all("schedule(dynamic, 1)" in v.kernels[0].code for v in out)


def test_refining_a_cuda_edit_varies_launch_shapes_around_it(settings):
    graph = dataclasses.replace(analyse(CHAIN, device="cpu", profile=False, settings=settings),
                                device="cuda")
    plan = dataclasses.replace(OfflinePlanner().plan(CHAIN, graph, settings), approved=True)
    first = OfflineCoder().code(CHAIN, graph, plan, settings, iteration=0)[0]
    k = first.kernels[0]
    assert k.lang == "cuda"
    target = next(ln for ln in k.code.splitlines() if "tanh" in ln and "=" in ln)
    mine = edited(first, {k.name: k.code.replace(target, target + "  // checked by hand")})
    coder = OfflineCoder()
    variants = coder.code(CHAIN, graph, plan, settings, iteration=1, previous=mine,
                          feedback=PASS)
    assert variants
    labels = [v.params["variant"] for v in variants]
    assert any("block=" in x or "ipt=" in x or "waves=" in x for x in labels), labels
    for v in variants:
        assert "// checked by hand" in v.kernels[0].code
    shapes = {(v.kernels[0].code.count("__launch_bounds__(128)"), v.program) for v in variants}
    assert len(shapes) == len(variants)               # each variant launches differently


def test_an_edit_not_made_from_an_offline_candidate_is_declined_plainly(cpu, settings):
    graph, plan, first = cpu
    llm_made = dataclasses.replace(first, id="", params={}, origin="claude")
    mine = edited(llm_made, {first.kernels[0].name: first.kernels[0].code + "\n"})
    coder = OfflineCoder()
    assert coder.code(CHAIN, graph, plan, settings, iteration=1, previous=mine,
                      feedback=PASS) == []
    assert "no template parameters to vary" in coder.why_empty
