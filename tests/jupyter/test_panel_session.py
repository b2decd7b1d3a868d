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
    """Writes KERNEL; from iteration 1 on it starts from the code it is given (what an LLM
    coder does with ``previous``), so a refine round shows what it was handed."""

    name = "scripted"

    def __init__(self, kernel: str = KERNEL):
        self.kernel = kernel
        self.given: list = []

    def code(self, problem, graph, plan, settings, *, iteration, previous=None, feedback=None):
        self.given.append(previous)
        code = previous.kernels[0].code + f"\n/* refined {iteration} */" if previous else \
            self.kernel
        return [Candidate(program=PROGRAM, iteration=iteration, origin="offline",
                          parent=previous.id if previous else None,
                          kernels=[KernelSource("fused_0", "c", code, ["fused_add_relu"])],
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
    shown = " ".join(getattr(w, "value", "") for w in panel.kernel_box.children
                     if isinstance(getattr(w, "value", None), str))
    assert "read-only here" in shown     # typing in a finished session's editor does nothing


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


def test_regenerate_after_a_verdict_never_ends_the_session(real_session):
    """A deterministic coder writes the verified candidate again, which is nothing new: the
    session stays where it was (the refine round still reachable), not "done"."""
    from stitchcuda_lab.jupyter.panel import SessionPanel

    s = real_session
    panel = SessionPanel(s, threaded=False)
    panel.advance()
    panel.plan_approve.click()
    panel.kernel_regen.click()           # the same candidate again, still waiting
    assert s.state.phase == "coded" and len(s.state.pending) == 1
    panel.kernel_approve.click()
    assert s.state.phase == "verified" and not panel.kernel_regen.disabled
    panel.kernel_regen.click()
    assert not panel.error, panel.error
    assert s.state.phase == "verified" and not s.state.finished
    assert s.state.failures[-1]["cause"] == "no_new_candidate"
    # the step came to nothing: the panel says why, not just "done"
    assert "no other candidate for this plan" in panel.notice.value
    assert panel.notice.layout.display is None
    assert not panel.next_button.disabled
    panel.next_button.click()
    assert not panel.error, panel.error
    assert s.state.iteration == 1 and len(s.state.candidates) == 2


def test_refine_after_a_passing_edit_starts_from_the_edit(settings):
    from stitchcuda_lab.jupyter.panel import SessionPanel
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session

    coder = ScriptedCoder()
    s = Session.create(problem_from_source(SOURCE), settings.replace(iters=2),
                       planner=ScriptedPlanner(), coder=coder)
    try:
        panel = SessionPanel(s, threaded=False)
        panel.advance()
        panel.plan_approve.click()
        panel.kernel_approve.click()
        first = panel.selected()
        panel.edit_kernel("fused_0", KERNEL.replace("float v = x[i] + 1.0f;",
                                                    "float v = 1.0f + x[i];  /* mine */"))
        panel.kernel_approve.click()
        mine = panel.selected()
        assert s.state.verdicts[mine.id].status == "pass" and mine.parent == first.id
        panel.next_button.click()                 # the Coder's next round, approved, verified
        assert not panel.error, panel.error
        assert coder.given[-1].id == mine.id      # handed the person's edit, not the best
        from stitchcuda_lab.jupyter import bridge
        new = bridge.candidates(s)[-1]            # the round's candidate (the tabs show the best)
        assert new.parent == mine.id and "/* mine */" in new.kernels[0].code
    finally:
        s.close()


BROKEN = KERNEL.replace("out[i] = v > 0.0f ? v : 0.0f;", "out[i] = v > 0.0f ? v : 0.0f")


def test_a_compile_error_is_marked_on_the_line_the_person_sees(settings):
    from stitchcuda_lab.jupyter.panel import SessionPanel
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session

    s = Session.create(problem_from_source(SOURCE), settings.replace(iters=0),
                       planner=ScriptedPlanner(), coder=ScriptedCoder(BROKEN))
    try:
        panel = SessionPanel(s, threaded=False, editor="codemirror")
        panel.advance()
        panel.plan_approve.click()
        panel.kernel_approve.click()
        c = panel.selected()
        v = s.state.verdicts[c.id]
        assert v.status == "build_error", v.summary()
        ed = panel._editors["fused_0"]
        errors = [d for d in ed.diagnostics if d["severity"] == "error"]
        assert errors, v.build_log
        # gcc reports the missing ';' at the next line: either way a line of the kernel shown
        lines = BROKEN.splitlines()
        assert errors[0]["line"] in (5, 6), (errors, v.build_log)
        assert lines[errors[0]["line"] - 1].strip() in ("out[i] = v > 0.0f ? v : 0.0f", "}")
        assert "<details open>" in panel.kernel_box.children[-1].value   # the log is open
        assert f"line {errors[0]['line']}" in "".join(
            w.value for w in panel.kernel_box.children if isinstance(getattr(w, "value", 0), str))
    finally:
        s.close()


BATCH_NORM_SOURCE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(torch.relu(self.bn(x) + 1.0))

def get_inputs():
    return [torch.randn(64, 32)]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("source, says", [
    (SOURCE, None),
    (BATCH_NORM_SOURCE, "captured in training mode: bn (BatchNorm1d), drop (Dropout) follow"),
], ids=["relu_only", "batch_norm_and_dropout"])
def test_the_plan_names_the_training_mode_modules_only_when_there_are_some(settings, source,
                                                                           says):
    """The offline planner on the real graph: a model without batch norm or dropout gets no
    note about training mode; one with them gets a note that names them."""
    from stitchcuda_lab.jupyter.panel import SessionPanel, _plain
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session

    s = Session.create(problem_from_source(source), settings.replace(iters=0))
    try:
        panel = SessionPanel(s, threaded=False)
        panel.advance()
        assert not panel.error, panel.error
        notes = _plain(panel.plan_notes.value)
        if says is None:
            assert "mode" not in notes and "batch norm" not in notes, notes
        else:
            assert says in notes, notes
    finally:
        s.close()


def test_typed_text_outlives_a_kernel_restart_until_it_is_discarded(real_session, settings):
    """What a person typed and has not verified is in the session folder as they type: a
    panel over the reopened session (after a kernel restart) shows it again, marked as an
    edit; Discard edits clears it there too."""
    from stitchcuda_lab.jupyter.panel import SessionPanel
    from stitchcuda_lab.session import Session

    s = real_session
    panel = SessionPanel(s, threaded=False)
    panel.advance()
    panel.plan_approve.click()
    assert s.state.phase == "coded"
    typed = KERNEL.replace("float v = x[i] + 1.0f;", "float v = x[i] + 1.0f;  /* half typed")
    panel.edit_kernel("fused_0", typed)
    s.close()                                       # what a kernel restart leaves behind

    again = Session.open(s.id, settings, planner=ScriptedPlanner(), coder=ScriptedCoder())
    try:
        reopened = SessionPanel(again, threaded=False)
        reopened.refresh()
        assert reopened.edited_kernels() == {"fused_0": typed}
        assert reopened._editors["fused_0"].value == typed
        assert reopened.kernel_approve.description == "Approve edit"
        assert "You edited" in reopened.draft_note.value
        reopened.kernel_discard.click()
        assert reopened._editors["fused_0"].value == KERNEL
        assert not (again.dir / "drafts.json").exists()
    finally:
        again.close()
    last = Session.open(s.id, settings, planner=ScriptedPlanner(), coder=ScriptedCoder())
    try:
        assert SessionPanel(last, threaded=False).edited_kernels() == {}
    finally:
        last.close()


def test_opening_a_session_twice_in_one_process_leaves_one_driver(real_session, settings):
    """A second open of the same session (``%stitch_open`` after ``Session.create`` in one
    kernel) supersedes the first object: it refuses to post, its panel says why, and closing
    it leaves the lock to the newer one. Two drivers interleaved their events in one log."""
    from stitchcuda_lab.errors import InvalidEvent
    from stitchcuda_lab.jupyter.panel import SessionPanel
    from stitchcuda_lab.loop import PlanApproved
    from stitchcuda_lab.session import Session

    s = real_session
    old_panel = SessionPanel(s, threaded=False)
    old_panel.advance()
    assert s.state.phase == "planned"
    new = Session.open(s.id, settings, planner=ScriptedPlanner(), coder=ScriptedCoder())
    try:
        with pytest.raises(InvalidEvent, match="opened again in this process"):
            s.post(PlanApproved())
        old_panel.plan_approve.click()
        assert "no longer in charge" in old_panel.next_step.value
        assert all(b.disabled for b in old_panel._buttons)
        s.close()
        assert new.log.holder() is not None             # still held, by the newer object
        new.post(PlanApproved())
        kinds = [r.kind for r in new.records()]
        assert kinds.count("plan_approved") == 1
    finally:
        new.close()


def test_a_reopened_session_judges_with_the_settings_it_was_created_with(settings):
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session

    s = Session.create(problem_from_source(SOURCE),
                       settings.replace(compile_modes="", timing_trials=7, seed=5),
                       planner=ScriptedPlanner(), coder=ScriptedCoder())
    s.close()
    again = Session.open(s.id, settings.replace(compile_modes="default,max-autotune",
                                                timing_trials=30, seed=1, timeout=99.0),
                         planner=ScriptedPlanner(), coder=ScriptedCoder())
    try:
        st = again.settings
        assert (st.compile_modes, st.timing_trials, st.seed) == ("", 7, 5)
        assert st.timeout == 99.0            # how long a job may take is this machine's
    finally:
        again.close()
