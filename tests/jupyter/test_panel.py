"""The session panel driven headless: set widget values, click buttons, read the Session."""

from __future__ import annotations

import pytest

from stitchcuda_lab import loop
from stitchcuda_lab.jupyter.panel import SessionPanel


@pytest.fixture
def panel(fake_session):
    fake_session.advance()
    return SessionPanel(fake_session, threaded=False)


def _approve_plan(panel):
    panel.plan_approve.click()
    assert not panel.error, panel.error


def test_plan_tab_lists_each_task_with_ops_share_reason_and_refs(panel):
    assert panel.tabs.get_title(0) == "Plan"
    assert [r.task.id for r in panel._task_rows] == ["t1", "t2"]
    info = panel._task_rows[0].widget.children[0].children[1].value
    for text in ("pointwise_fusion", "add, relu", "80%", "two memory-bound ops",
                 "memory-coalescing"):
        assert text in info
    assert panel._task_rows[0].technique.value == "one pass over x"
    assert not panel.plan_approve.disabled


def test_keep_tasks_cannot_be_unchecked(panel):
    assert panel._task_rows[1].approve.disabled


def test_approve_plan_posts_the_persons_edits_and_advances(panel):
    row = panel._task_rows[0]
    row.technique.value = "vectorised float4 pass"
    row.params.value = '{"block": 128}'
    assert panel._task_rows[1].down.disabled and panel._task_rows[0].up.disabled
    row.down.click()                    # reorder: t2 first
    _approve_plan(panel)
    s = panel.session
    edited = next(e for e in s.posted if isinstance(e, loop.PlanEdited)).plan
    assert [t.id for t in edited.tasks] == ["t2", "t1"]
    t1 = edited.task("t1")
    assert (t1.technique, t1.params) == ("vectorised float4 pass", {"block": 128})
    assert s.state.plan.approved and s.state.plan.task("t1").status == "approved"
    assert s.state.phase == "coded"           # the Coder ran; a person approves candidates
    assert panel.plan_approve.disabled


def test_a_plan_left_as_it_was_is_approved_without_an_edit(panel):
    _approve_plan(panel)
    s = panel.session
    assert not any(isinstance(e, loop.PlanEdited) for e in s.posted)
    assert s.state.plan.approved and all(t.status == "approved" for t in s.state.plan.tasks
                                         if t.kind != "keep")


def test_unchecked_task_is_skipped(panel):
    panel._task_rows[0].approve.value = False
    _approve_plan(panel)
    assert panel.session.state.plan.task("t1").status == "skipped"


def test_bad_params_show_in_the_error_box_not_a_traceback(panel):
    panel._task_rows[0].params.value = "{block: 128"
    panel.plan_approve.click()
    assert "params are not valid JSON" in panel.error and "Hint" in panel.error
    assert panel.session.state.phase == "planned"


def test_kernels_tab_shows_code_diff_and_log_and_approve_verifies(panel):
    _approve_plan(panel)
    c = panel.selected()
    assert panel._editors["fused_0"].value == c.kernels[0].code
    assert not panel.kernel_approve.disabled
    panel.kernel_approve.click()
    v = panel.session.state.verdicts[c.id]
    assert v.status == "pass"
    assert "pass" in panel.verdict_html.value and "1.50x" in panel.verdict_html.value
    assert "compile log" in panel.kernel_box.children[-1].value


def test_wrong_edit_is_caught_by_the_verifier_and_a_fix_passes(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    first = panel.selected()
    ed = panel._editors["fused_0"]
    ed.value = ed.value.replace("+ 1.0f", "+ 2.0f /* BUG */")
    assert panel.kernel_approve.description == "Approve edit"
    panel.kernel_approve.click()
    assert not panel.error, panel.error
    edited = panel.selected()
    assert edited.parent == first.id and edited.origin == "user"
    v = panel.session.state.verdicts[edited.id]
    assert v.status == "incorrect"
    assert "incorrect" in panel.verdict_html.value
    assert "mismatches" in panel.verdict_html.value
    # fix it
    panel._editors["fused_0"].value = first.kernels[0].code.replace("+ 1.0f", "+ 1.0f ")
    panel.kernel_approve.click()
    fixed = panel.selected()
    assert panel.session.state.verdicts[fixed.id].status == "pass"


def _kernel_text(panel):
    return "".join(w.value for w in panel.kernel_box.children
                   if isinstance(getattr(w, "value", None), str))


def test_approve_with_an_edited_editor_verifies_the_edit_not_the_original(panel):
    _approve_plan(panel)
    original = panel.selected()
    panel.edit_kernel("fused_0", original.kernels[0].code.replace("+ 1.0f", "+ 1.0f /* mine */"))
    panel.kernel_approve.click()
    s = panel.session.state
    assert original.id not in s.verdicts and original.id in s.pending   # never verified
    mine = panel.selected()
    assert mine.id != original.id and mine.parent == original.id and mine.origin == "user"
    assert "/* mine */" in mine.kernels[0].code and s.verdicts[mine.id].status == "pass"
    assert "/* mine */" in panel._editors["fused_0"].value     # the editor shows the edit


def test_typed_text_survives_redraws_and_switching_versions(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    first = panel.selected()
    panel.edit_kernel("fused_0", first.kernels[0].code + "\n// half-way through an idea")
    # the dropdown marks the version as it is typed in, before any redraw
    assert any("unsaved edits" in label for label, _ in panel.version.options)
    assert panel.version.value == first.id
    panel.refresh()                                     # what every finished step does
    assert panel._editors["fused_0"].value.endswith("half-way through an idea")
    assert "✎" in panel.draft_note.value and "Approve edit" in panel.draft_note.value
    panel.next_button.click()                           # a new round arrives and is shown
    assert panel.selected().id != first.id
    panel.select(first.id)
    assert panel._editors["fused_0"].value.endswith("half-way through an idea")
    assert any("unsaved edits" in label for label, _ in panel.version.options)


def test_discard_edits_puts_the_versions_code_back(panel):
    _approve_plan(panel)
    c = panel.selected()
    panel.edit_kernel("fused_0", "/* scratch */")
    assert not panel.kernel_discard.disabled
    panel.kernel_discard.click()
    assert panel._editors["fused_0"].value == c.kernels[0].code
    assert panel.kernel_approve.description == "Approve" and panel.kernel_discard.disabled


def test_a_fix_that_restores_the_original_code_is_its_own_selected_version(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    first = panel.selected()
    code = first.kernels[0].code
    panel.edit_kernel("fused_0", code.replace("+ 1.0f", "+ 2.0f /* BUG */"))
    panel.kernel_approve.click()
    broken = panel.selected()
    panel.edit_kernel("fused_0", code)                  # the fix is exactly the first code
    panel.kernel_approve.click()
    fixed = panel.selected()
    s = panel.session.state
    assert fixed.id not in (first.id, broken.id)
    assert (fixed.parent, broken.parent, first.parent) == (broken.id, first.id, None)
    assert s.verdicts[fixed.id].status == "pass" and s.verdicts[broken.id].status == "incorrect"
    assert fixed.id in panel.verdict_html.value
    # the person is told the fix repeats the first version's code, and how that one fared
    assert f"same code as version {first.id} (pass" in panel.note
    assert f"a version of its own under {broken.id}" in panel.note
    # History draws the tree: each version under its parent, none under its own child
    rows = panel.versions_html.value.split("<tr>")[2:]
    order = [next(i for i in (first.id, broken.id, fixed.id) if i in r.split("</td>")[1])
             for r in rows]
    assert order == [first.id, broken.id, fixed.id]
    assert "your edit" in panel.versions_html.value


def test_the_same_edit_twice_shows_the_version_it_already_is(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    first = panel.selected()
    edit = first.kernels[0].code.replace("+ 1.0f", "+ 1.0f /* same */")
    panel.edit_kernel("fused_0", edit)
    panel.kernel_approve.click()
    mine = panel.selected()
    panel.select(first.id)
    panel.edit_kernel("fused_0", edit)
    panel.kernel_approve.click()
    assert panel.selected().id == mine.id and "verified before" in panel.note
    assert not panel.error


def test_approve_without_an_edit_on_a_verified_candidate_says_what_to_do(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    assert panel.kernel_approve.disabled           # nothing to approve: no edit, not pending
    panel.approve_candidate()
    assert "verified already" in panel.note and not panel.error


def test_profile_tab_draws_timeline_and_kernel_figures(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    tl = panel.figures["timeline"]
    assert tl.layout.xaxis.type == "linear"
    assert any("candidate" in y for t in tl.data for y in t.y)
    assert panel.figures["kernels"].data
    assert panel.timeline_out.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert "CPU" in panel.ncu_note.value       # why there is no ncu chart


def test_run_next_iteration_then_stop_and_export(panel, tmp_path):
    _approve_plan(panel)
    panel.next_button.click()           # approves the pending candidate and verifies it
    assert panel.session.state.phase == "verified"
    panel.next_button.click()           # refine round: code, approve, verify
    s = panel.session.state
    assert s.iteration == 1 and s.phase == "verified"
    hist = panel.figures["history"]
    eager = next(t for t in hist.data if t.name == "vs eager")
    assert list(eager.x) == [0, 1] and list(eager.y) == [1.5, 1.75]
    assert "★" in panel.versions_html.value
    panel.export_path.value = str(tmp_path / "out")
    panel.stop_button.click()
    assert panel.session.state.phase == "stopped"
    assert (tmp_path / "out" / "model_new.py").exists()
    assert "Exported to" in panel.export_html.value
    assert panel.stop_button.description == "Export"     # nothing left to stop
    panel.model_button.click()
    assert panel.model is not None


def test_errors_from_the_session_land_in_the_error_box_with_the_hint(panel):
    panel.regenerate()                  # no candidates yet: the loop refuses
    assert "Regenerate" in panel.error and "Hint" in panel.error


def test_progress_callback_moves_the_bar(panel):
    panel._on_progress("verifying", 1, 4)
    assert panel.progress.value == 25 and panel.progress_label.value == "verifying"
    panel._on_progress("half", 0.5)
    assert panel.progress.value == 50


def test_threaded_steps_leave_the_notebook_free_and_finish(fake_session):
    fake_session.advance()
    p = SessionPanel(fake_session, threaded=True)
    p.plan_approve.click()
    assert p.wait(30)
    assert fake_session.state.phase == "coded"
    assert p.plan_approve.disabled and not p.kernel_approve.disabled


def test_panel_renders_as_text_and_html_outside_widgets(panel):
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Plan (offline, cpu)" in bundle["text/plain"]
    assert "<table>" in bundle["text/html"]


def test_failed_session_shows_its_message(fake_session):
    fake_session.advance()
    fake_session.post(loop.Failed("the worker died"))
    p = SessionPanel(fake_session, threaded=False)
    assert "the worker died" in p.error


def test_the_verdict_says_its_status_once(panel):
    from stitchcuda_lab.jupyter.panel import _plain
    _approve_plan(panel)
    panel.kernel_approve.click()
    v = panel.session.state.last_verdict()
    for markup in (panel.verdict_html.value, v._repr_html_()):
        assert _plain(markup).split().count("pass") == 1, _plain(markup)


def test_the_panel_says_what_to_do_next_at_every_stop(panel):
    assert "Approve plan" in panel.next_step.value
    _approve_plan(panel)
    assert "Approve" in panel.next_step.value and panel.selected().id in panel.next_step.value
    panel.kernel_approve.click()
    assert "Run next iteration" in panel.next_step.value
    panel.stop_button.click()
    assert "Load finished model" in panel.next_step.value


def test_the_next_line_says_when_the_sessions_iterations_are_done(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    panel.session.settings = panel.session.settings.replace(iters=3)
    panel.refresh()
    assert "lets the Coder refine" in panel.next_step.value
    assert "this session was started with" not in panel.next_step.value
    panel.session.settings = panel.session.settings.replace(iters=0)
    panel.refresh()
    nxt = panel.next_step.value
    assert "The 0 refine iterations this session was started with are done" in nxt
    assert "Stop and export</b> keeps the best" in nxt and "Run next iteration" in nxt


def test_past_the_end_of_a_recording_the_next_line_does_not_offer_the_dead_end(panel):
    from stitchcuda_lab.errors import ReplayExhausted
    _approve_plan(panel)
    panel.kernel_approve.click()

    def beyond() -> None:
        raise ReplayExhausted("the recording has no more coder exchanges to replay")
    panel._run("Running the next iteration", beyond)
    assert "no more coder exchanges" in panel.error
    nxt = panel.next_step.value
    assert "The recording ends here" in nxt and "cannot go further" in nxt
    assert "carries on from there" not in nxt
    assert panel.next_button.disabled and not panel.stop_button.disabled


def test_after_stop_and_export_the_next_line_says_where_not_the_same_action(panel, tmp_path):
    _approve_plan(panel)
    panel.kernel_approve.click()
    panel.names["session"] = "s"
    panel.export_path.value = str(tmp_path / "out")
    panel.stop_button.click()
    nxt = panel.next_step.value
    assert "Stop and export" not in nxt, nxt
    assert "stopped" in nxt and str(tmp_path / "out") in nxt
    assert "s.model()" in nxt and f"%stitch_open {panel.session.id}" in nxt
    assert "Stop and export" not in panel.text()


def test_the_panel_says_which_candidate_is_best_and_why(panel):
    _approve_plan(panel)
    panel.kernel_approve.click()
    first = panel.selected()
    panel.edit_kernel("fused_0", first.kernels[0].code.replace("+ 1.0f", "+ 2.0f /* BUG */"))
    panel.kernel_approve.click()
    text = panel.text()
    assert f"Best: {first.id}" in text and "1.50x vs eager" in text
    assert "the only candidate that passed" in text and "1 incorrect" in text


def test_a_finished_session_says_why_it_stopped(fake_session):
    fake_session.advance(auto=True)
    p = SessionPanel(fake_session, threaded=False)
    assert "Session done: iterations done." in p.text()
    assert "the fastest of 3 passing candidates" in p.text()


def test_an_error_is_cleared_when_the_next_step_succeeds(panel):
    panel.regenerate()                       # refused: no candidates yet
    assert panel.error
    _approve_plan(panel)
    assert panel.error == "" and panel.error_box.layout.display == "none"


def test_each_step_ends_at_100_percent_with_what_happened(panel):
    _approve_plan(panel)
    assert panel.progress.value == 100 and panel.progress.bar_style == "success"
    assert "done" not in panel.progress_label.value     # it waits for the person: not done
    assert "wait" in panel.progress_label.value and "approval" in panel.progress_label.value
    panel.kernel_approve.click()
    assert panel.progress_label.value.endswith(": done")   # verified: nothing waits
    panel.regenerate()
    panel.regenerate()
    panel.session.post(loop.Stop("test"))
    panel.regenerate()                       # refused by the loop: the bar says it failed
    assert panel.progress.bar_style == "danger" and "failed" in panel.progress_label.value


def test_a_click_while_a_step_runs_is_a_note_not_an_error(panel):
    panel._busy, panel._step = True, "Verifying abc"
    panel.next_button.click()
    assert "still running" in panel.note and panel.error == ""
    panel._busy = False


def test_the_summary_names_the_op_that_kept_the_reference(panel):
    from stitchcuda_lab.jupyter.panel import summary_html
    _approve_plan(panel)
    panel.kernel_approve.click()
    panel.session.kept_parts = lambda: (["cumsum: no scan template"],
                                        ["no candidate beat eager (best 0.83x)"])
    # what the candidates did first, then the op, named as left to PyTorch (not as the reason)
    assert ("Reference kept:</b> no candidate beat eager (best 0.83x). Left to PyTorch: "
            "cumsum: no scan template.") in summary_html(panel.session)
    panel.session.kept_parts = lambda: None
    assert "Reference kept" not in summary_html(panel.session)


def test_progress_says_the_kernels_wait_for_approval_not_done(panel):
    panel.plan_approve.click()
    assert panel.session.state.needs == "approve_candidate"
    label = panel.progress_label.value
    assert not label.endswith("done"), label
    assert "kernel waits for your approval" in label and "Kernels" in label
    panel.kernel_regen.click()
    assert "waits for your approval" in panel.progress_label.value


def _emoji_only(text):
    """Characters a plain font lacks: Misc Technical (hourglass, pause), emoji, emoji selector."""
    return sorted({ch for ch in text if 0x2300 <= ord(ch) <= 0x23FF or ord(ch) >= 0x1F000
                   or ord(ch) == 0xFE0F})


def test_the_busy_and_detached_lines_use_css_indicators_not_emoji(fake_session):
    import threading
    fake_session.advance()
    p = SessionPanel(fake_session, threaded=True)
    gate = threading.Event()
    p._run("Slow step", gate.wait, advance=False)
    try:
        busy = p.next_step.value
        assert "stitch-spinner" in busy and "Slow step" in busy
        assert _emoji_only(busy) == [], busy
    finally:
        gate.set()
        assert p.wait(30)
    assert "@keyframes stitch-spin" in p._css.value and ".stitch-paused" in p._css.value
    p.detach("closed here")
    assert "stitch-paused" in p.next_step.value and _emoji_only(p.next_step.value) == []


def test_after_a_round_the_tabs_show_its_best_candidate_not_its_last(panel, monkeypatch):
    import dataclasses
    s = panel.session
    verify = s._verify

    def slower_refine(c):   # the refine round's candidate passes, slower than the first
        v = verify(c)
        if c.iteration == 1:
            v = dataclasses.replace(v, speedup_vs_eager=1.2, timings={"eager": 0.3, "ours": 0.25})
        return v
    monkeypatch.setattr(s, "_verify", slower_refine)
    _approve_plan(panel)
    panel.next_button.click()
    first = panel.selected().id
    panel.next_button.click()
    last = bridge_candidates(s)[-1].id
    assert last != first and s.best()[0].id == first
    assert panel.selected().id == first      # the best, which the header names
    assert panel.version.value == first


def bridge_candidates(session):
    from stitchcuda_lab.jupyter import bridge
    return bridge.candidates(session)


def test_a_note_repeated_on_every_trial_is_written_once_and_a_long_one_folds():
    from stitchcuda_lab.jupyter.panel import trial_notes
    from stitchcuda_lab.verdict import TrialResult
    long = "output_mismatch: 512 of 4096 elements further from the float64 result " * 4
    trials = [TrialResult(seed=11, ok=False, message=long),
              TrialResult(seed=12, ok=False, message=long),
              TrialResult(seed=13, ok=True, message=""),
              TrialResult(seed=14, ok=False, message="nondeterministic")]
    notes = trial_notes(trials)
    summary = notes[0].split("</summary>")[0]
    assert notes[0].startswith("<details><summary>") and long.strip() in notes[0]
    assert len(summary) < len(long) // 2
    assert notes[1] == "<i>as seed 11</i>"
    assert notes[2] == "" and notes[3] == "nondeterministic"


def test_a_verdict_whose_baselines_were_timed_again_says_why_in_words():
    from stitchcuda_lab.jupyter.panel import verdict_html
    from stitchcuda_lab.verdict import Verdict
    v = Verdict(status="pass", speedup_vs_eager=1.4,
                flags=["baselines_retimed:eager 20.3->81.2 ms"])
    text = verdict_html(v)
    assert "load changed" in text and "81.2 ms" in text and "20.3 ms before" in text
    assert "load changed" not in verdict_html(Verdict(status="pass", speedup_vs_eager=1.4))


def test_an_incorrect_verdict_says_its_atol_was_scaled_where_the_comparison_scaled_it():
    from stitchcuda_lab.jupyter.panel import verdict_html
    from stitchcuda_lab.verdict import Verdict
    reason = ("output_mismatch: 12 of 4096 elements out of tolerance (atol=1.4e-05: 0.0001 x "
              "the reference's root mean square 0.14, rtol=0.0001)")
    scaled = verdict_html(Verdict(status="incorrect", reason=reason, atol=1e-4, rtol=1e-4,
                                  max_abs_err=3e-4, max_rel_err=2e-3))
    assert "atol as asked: scaled to the output's size above" in scaled
    plain = verdict_html(Verdict(status="incorrect", reason=reason.split(": 0.0001")[0] + ")",
                                 atol=1e-4, rtol=1e-4, max_abs_err=3e-4, max_rel_err=2e-3))
    assert "scaled" not in plain


def test_history_draws_siblings_as_a_tree_and_marks_a_retimed_speedup(panel):
    from stitchcuda_lab.jupyter.panel import summary_html, versions_html
    _approve_plan(panel)
    panel.kernel_approve.click()
    first = panel.selected()
    code = first.kernels[0].code
    kids = []
    for tag in ("/* one */", "/* two */"):          # two edits, both of the first version
        panel.select(first.id)
        panel.edit_kernel("fused_0", code.replace("+ 1.0f", f"+ 1.0f {tag}"))
        panel.kernel_approve.click()
        kids.append(panel.selected().id)
    rows = {r.split("<code>")[1].split("</code>")[0]: r
            for r in versions_html(panel.session).split("<tr>")[2:]}
    assert "├ " in rows[kids[0]] and "└ " in rows[kids[1]]   # the last sibling closes the branch
    assert "white-space:nowrap" in rows[kids[0]]
    v = panel.session.state.verdicts[kids[1]]
    assert "†" not in rows[kids[1]]
    v.flags.append("baselines_retimed:eager 0.788->2.76 ms")
    marked = versions_html(panel.session)
    assert "†" in marked and "timed again" in marked
    best = panel.session.best()
    assert ("†" in summary_html(panel.session)) == (best is not None and best[0].id == kids[1])
    # timed while the host's load moved: marked, said in words under the table, and named in
    # the summary where it is faster than the best the session ranks first
    w = panel.session.state.verdicts[kids[0]]
    w.flags.append("host_load_changed:eager 0.2->0.05 ms")
    w.speedup_vs_eager = 50.0
    marked = versions_html(panel.session)
    row = [r for r in marked.split("<tr>") if f"<code>{kids[0]}</code>" in r][0]
    assert "‡" in row and "load moved" in marked.split("</table>")[1]
    best = panel.session.best()
    assert best[0].id != kids[0]
    summary = summary_html(panel.session)
    assert f"<code>{kids[0]}</code> measured 50.00x while the host's load moved" in summary
    from stitchcuda_lab.verdict import load_changed
    steady = sum(1 for x in panel.session.state.verdicts.values()
                 if x.status == "pass" and not load_changed(x.flags))
    assert f"the fastest of {steady} passing candidate" in summary
    assert "timed under a steady load" in summary


def test_the_editor_opens_at_the_edit_not_the_entry():
    """After an edit is verified the editor opens at its first changed line (the diff against
    the parent), not at the entry function with the edit out of sight below it."""
    import types

    from stitchcuda_lab.jupyter.panel import _focus_line
    parent = "\n".join(["// helper"] * 5 + ["void fused(float* x) {"] + ["  x[0] += 1;"] * 60
                       + ["}"])
    edited = parent.replace("  x[0] += 1;\n}", "  x[0] += 1; /* mine */\n}")
    k = types.SimpleNamespace(entry=["fused"], name="fused")
    assert _focus_line(parent, k, []) == 4                     # the entry, two lines above
    assert _focus_line(edited, k, [], parent) == 66 - 3        # the edit at line 66
    assert _focus_line(parent, k, [], parent) == 4             # nothing changed: the entry
    err = [{"line": 20, "severity": "error"}]
    assert _focus_line(edited, k, err, parent) == 17           # an error comes first


def test_a_long_technique_is_shown_whole():
    import dataclasses

    from stitchcuda_lab.jupyter.panel import _TaskRow
    from stitchcuda_lab.plan import Task
    long = ("library aten.conv2d.default + one fused epilogue kernel (row kernel (32 rows per "
            "block), bias, relu and the residual add in one pass)")
    task = Task(id="t1", kind="gemm_epilogue", ops=["conv2d"], technique=long)
    row = _TaskRow(task, lambda *_: None, editable=True, editor="textarea")
    assert row.technique.value == long and row.technique.rows >= 2
    short = _TaskRow(dataclasses.replace(task, technique="one pass"), lambda *_: None,
                     editable=True, editor="textarea")
    assert short.technique.rows == 1


def test_a_load_change_while_timing_is_explained_in_words():
    from stitchcuda_lab.jupyter.panel import flag_notes
    notes = flag_notes(["host_load_changed:eager 14.9->1.31 ms"])
    assert len(notes) == 1 and "1.31 ms right after the candidate against 14.9 ms" in notes[0]
    assert "ranked below" in notes[0]


def test_the_history_says_what_an_llm_candidate_tried_from_its_notes():
    import types

    from stitchcuda_lab.candidate import Candidate, KernelSource
    from stitchcuda_lab.jupyter.panel import versions_html
    from stitchcuda_lab.verdict import Verdict
    notes = ("Fused the bias, GELU and scale into the GEMM epilogue with float4 stores. "
             "Kept the reduction in a second kernel.\nDetails follow.")
    c = Candidate(program="class ModelNew: ...", iteration=0, origin="claude", notes=notes,
                  kernels=[KernelSource("k", "cuda", "__global__ void k() {}", ["k"])])
    s = types.SimpleNamespace(state=types.SimpleNamespace(
        candidates={c.id: c}, verdicts={c.id: Verdict(status="pass", correct=True)}),
        best=lambda: None)
    markup = versions_html(s)
    assert "Fused the bias, GELU and scale into the GEMM epilogue" in markup
    assert "Details follow" not in markup and "…" in markup
