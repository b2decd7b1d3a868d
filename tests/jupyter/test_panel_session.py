"""The panel over the real Session, worker and Verifier (CPU C kernels), with scripted agents
through the Session's planner/coder seams. Catches a wrong edit for real."""

from __future__ import annotations

import pytest

from stitchcuda_lab.candidate import Candidate, KernelSource
from stitchcuda_lab.plan import Plan, Task

from .conftest import SOURCE
from .fakes import KERNEL

pytestmark = pytest.mark.e2e

PROGRAM = '''
import torch
from stitchcuda_lab import runtime

class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SOURCES["fused_0"], lang="c", name="fused_0")

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        self.mod.call("fused_add_relu", x, out, x.numel())
        return out
'''


class ScriptedPlanner:
    name = "scripted"

    def plan(self, problem, graph, settings):
        return Plan(device="cpu", agent="scripted", tasks=[
            Task(id="t1", kind="pointwise_fusion", ops=["add", "relu"], share=0.9,
                 targets=["aten.add.Tensor", "aten.relu.default"], technique="one pass",
                 reason="two memory-bound ops", refs=["memory-coalescing"])])


class ScriptedCoder:
    name = "scripted"

    def code(self, problem, graph, plan, settings, *, iteration, previous=None, feedback=None):
        return [Candidate(program=PROGRAM, iteration=iteration, origin="offline",
                          kernels=[KernelSource("fused_0", "c", KERNEL, ["fused_add_relu"])],
                          replaced=["aten.add.Tensor", "aten.relu.default"])]


@pytest.fixture
def real_session(settings):
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session
    s = Session.create(problem_from_source(SOURCE), settings.replace(iters=1, profile=True),
                       planner=ScriptedPlanner(), coder=ScriptedCoder())
    yield s
    s.close()


def test_panel_drives_the_real_loop_and_catches_a_wrong_edit(real_session, tmp_path):
    from stitchcuda_lab.jupyter.panel import SessionPanel

    s = real_session
    panel = SessionPanel(s, threaded=False)
    panel.advance()
    assert s.state.phase == "planned" and not panel.plan_approve.disabled
    assert "Memory coalescing" in panel._task_rows[0].widget.children[0].children[1].value \
        or "memory-coalescing" in panel._task_rows[0].widget.children[0].children[1].value

    panel.plan_approve.click()
    assert not panel.error, panel.error
    assert s.state.phase == "coded"
    panel.next_button.click()                     # approve the candidate, verify it
    assert not panel.error, panel.error
    first = panel.selected()
    assert s.state.verdicts[first.id].status == "pass"
    tl = panel.figures["timeline"]
    assert tl.layout.xaxis.type == "linear"
    lanes = set(tl.layout.yaxis.categoryarray)
    assert any(lane.startswith("reference · ") for lane in lanes)
    assert any(lane.startswith("candidate · ") for lane in lanes)
    assert panel.figures["kernels"].data

    panel.edit_kernel("fused_0", KERNEL.replace("x[i] + 1.0f", "x[i] + 2.0f"))  # a slip
    panel.verify_edit()
    assert not panel.error, panel.error
    wrong = panel.selected()
    assert wrong.parent == first.id
    assert s.state.verdicts[wrong.id].status == "incorrect"
    assert "incorrect" in panel.verdict_html.value

    panel.export_path.value = str(tmp_path / "out")
    panel.stop_button.click()
    assert not panel.error, panel.error
    assert s.state.phase == "stopped" and panel.exported.is_dir()
    assert any(panel.exported.iterdir())


def test_regenerate_button_asks_the_coder_again(real_session):
    from stitchcuda_lab.jupyter.panel import SessionPanel

    s = real_session
    panel = SessionPanel(s, threaded=False)
    panel.advance()
    panel.plan_approve.click()
    assert s.state.phase == "coded" and not panel.kernel_regen.disabled
    panel.kernel_regen.click()
    assert not panel.error, panel.error
    assert s.state.phase == "coded" and s.state.pending      # a fresh round awaits approval
    assert [h["event"] for h in s.state.history].count("regenerate") == 1
