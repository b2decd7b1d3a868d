"""The session panel: an ipywidgets view over one Session (tabs Plan, Kernels, Profile, History).

The panel holds no loop state of its own: ``refresh()`` redraws it from the Session, and every
button posts an event to the Session (through ``bridge``) and then lets the Session advance until
it needs a person again. Long steps run in a background thread so the notebook stays responsive;
progress comes from the Session's ``on_progress`` callback, errors land in the panel's error box.

What the person types is never lost: editor text is kept per candidate and kernel until it is
verified or discarded, whatever redraws in between, and **Approve** with an edited editor
verifies the edit as a new version (its own id, the shown candidate as parent).

>>> panel = SessionPanel(session)        # doctest: +SKIP
>>> panel                                # shows the tabs in a notebook
>>> panel.plan_approve.click()           # the same as clicking "Approve plan"
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import json
import re
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..errors import ReplayExhausted, StitchError
from ..candidate import Candidate
from ..plan import Plan, Task
from ..verdict import SCALED_ATOL, Verdict, baselines_retimed, load_changed
from . import bridge, diagnostics, figures
from .editor import make_editor

_MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
_TAB_TITLES = ("Plan", "Kernels", "Profile", "History")


class SessionPanel:
    """A view over ``session``. ``threaded=False`` runs steps inline (tests, scripts).

    ``names`` says which notebook variables hold the session and the panel (``{"session":
    "s", "panel": "p"}``, what ``%%stitch -o s --panel p`` made), so messages name what
    exists; ``editor`` picks the code editor (auto, codemirror, textarea).
    """

    def __init__(self, session: Any, *, threaded: bool = True, export_dir: str | None = None,
                 names: dict[str, str] | None = None, editor: str = "auto"):
        self.session = session
        self.threaded = threaded
        self.names = dict(names or {})
        self.editor_kind = editor
        self.model: Any = None                     # the finished model, once loaded
        self.exported: Path | None = None
        self.figures: dict[str, Any] = {}          # name -> plotly Figure shown last
        self._thread: threading.Thread | None = None
        self._busy = False
        self._step = ""                            # the running step's label
        self.last_exception: BaseException | None = None   # the last step's error, if any
        self._lock = threading.RLock()
        self._task_rows: list[_TaskRow] = []
        self._editors: dict[str, Any] = {}         # kernel name -> editor of the shown candidate
        # candidate id -> kernel -> typed text, kept in the session folder as it is typed
        self._drafts: dict[str, dict[str, str]] = bridge.drafts(session)
        self._drawn: tuple | None = None           # what the Kernels tab shows now
        self._selected: str | None = None          # candidate id shown in Kernels/Profile
        self._follow_latest = True
        self._detached = ""                        # why this panel no longer drives the session

        # header: title, what next, progress, notices and errors, best / why it stopped
        self.title = W.HTML()
        self._css = W.HTML(_PANEL_CSS + _CODE_CSS, layout=W.Layout(display="none"))
        self.status = W.HTML()
        self.next_step = W.HTML()
        self.progress = W.IntProgress(value=0, min=0, max=100, description="",
                                      layout=W.Layout(width="220px", visibility="hidden"))
        self.progress_label = W.Label("")
        self.notice = W.HTML("", layout=W.Layout(display="none"))
        self.error_box = W.HTML("", layout=W.Layout(display="none"))
        self.summary = W.HTML()
        header = W.VBox([self._css, self.title,
                         W.HBox([self.status, self.progress, self.progress_label]),
                         self.next_step, self.notice, self.error_box, self.summary])

        # Plan tab
        self.plan_rows = W.VBox()
        self.plan_notes = W.HTML()
        self.plan_approve = W.Button(description="Approve plan", button_style="success",
                                     icon="check",
                                     tooltip="Approve the checked tasks in this order")
        self.plan_approve.on_click(lambda _: self.approve_plan())
        plan_tab = W.VBox([self.plan_notes, self.plan_rows, self.plan_approve])

        # Kernels tab
        self.version = W.Dropdown(description="version", layout=W.Layout(width="560px"))
        self.version.observe(self._on_version, names="value")
        self.draft_note = W.HTML()
        self.kernel_box = W.VBox()
        self.kernel_approve = W.Button(description="Approve", button_style="success", icon="check",
                                       tooltip="Verify this candidate; with edits, verify your "
                                               "edit as a new version")
        self.kernel_discard = W.Button(description="Discard edits", icon="undo",
                                       tooltip="Put the shown version's code back in the editors")
        self.kernel_regen = W.Button(description="Regenerate", icon="refresh",
                                     tooltip="Ask the Coder for other candidates at this "
                                             "iteration (any waiting ones are set aside)")
        self.kernel_approve.on_click(lambda _: self.approve_candidate())
        self.kernel_discard.on_click(lambda _: self.discard_edits())
        self.kernel_regen.on_click(lambda _: self.regenerate())
        kernels_tab = W.VBox([self.version, self.draft_note, self.kernel_box,
                              W.HBox([self.kernel_approve, self.kernel_discard,
                                      self.kernel_regen])])

        # Profile tab
        self.verdict_html = W.HTML()
        self.profile_note = W.HTML()
        self.timeline_out = W.Output()
        self.kernel_table = W.HTML()
        self.kernels_out = W.Output()
        self.ncu_out = W.Output()
        self.ncu_note = W.HTML()
        profile_tab = W.VBox([self.verdict_html, self.profile_note, self.timeline_out,
                              self.kernel_table, self.kernels_out, self.ncu_note, self.ncu_out])

        # History tab
        self.history_out = W.Output()
        self.versions_html = W.HTML()
        self.next_button = W.Button(description="Run next iteration", button_style="primary",
                                    icon="forward", tooltip="Verify the candidates waiting for "
                                    "approval, or let the Coder refine from the verdicts and "
                                    "verify its new round")
        self.stop_button = W.Button(description="Stop and export", button_style="warning",
                                    icon="stop")
        self.export_path = W.Text(value=export_dir or "", placeholder="export folder",
                                  description="export to", layout=W.Layout(width="420px"))
        self.model_button = W.Button(description="Load finished model", icon="download",
                                     tooltip="session.model(): the best candidate as a module")
        self.export_html = W.HTML()
        self.next_button.on_click(lambda _: self.next_iteration())
        self.stop_button.on_click(lambda _: self.stop_and_export())
        self.model_button.on_click(lambda _: self.load_model())
        history_tab = W.VBox([self.history_out, self.versions_html,
                              W.HBox([self.next_button, self.stop_button, self.model_button]),
                              self.export_path, self.export_html])

        self.tabs = W.Tab(children=[plan_tab, kernels_tab, profile_tab, history_tab])
        for i, t in enumerate(_TAB_TITLES):
            self.tabs.set_title(i, t)
        self.widget = W.VBox([header, self.tabs], layout=W.Layout(width="100%"))
        self.widget.add_class("stitch-panel")
        self._buttons = [self.plan_approve, self.kernel_approve, self.kernel_discard,
                         self.kernel_regen, self.next_button, self.stop_button, self.model_button]
        for b in self._buttons:
            b.layout.width = "auto"       # the full label, never "Run next iterat..."
        self.refresh()

    # ---- display --------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kw: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kw) or {}
        bundle["text/plain"] = self.text()
        bundle["text/html"] = self.html()
        return bundle

    def text(self) -> str:
        """The panel's content as text (what papermill and terminals show)."""
        s = self.session
        lines = [f"stitch session {getattr(s, 'id', '?')}: {bridge.phase(s) or 'new'}"]
        p = bridge.plan(s)
        if p is not None:
            lines.append(str(p))
        lines.append(_plain(self.summary.value))
        nxt = _plain(self.next_step.value)
        if nxt:
            lines.append(nxt)
        if self.error:
            lines.append(self.error)
        return "\n".join(x for x in lines if x)

    def html(self) -> str:
        s = self.session
        head = (f"<b>stitch session {html.escape(str(getattr(s, 'id', '?')))}</b>: "
                f"{html.escape(bridge.phase(s) or 'new')}")
        parts = [head]
        p = bridge.plan(s)
        if p is not None:
            parts.append(p._repr_html_())
        parts += [self.summary.value, self.next_step.value, self.error_box.value]
        return "<div class='stitch-session'>" + "".join(parts) + "</div>"

    # ---- refresh --------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraw every tab from the Session (typed edits survive: they are kept as drafts)."""
        with self._lock:
            s = self.session
            ph = bridge.phase(s)
            sid = html.escape(str(getattr(s, "id", "")))
            name = html.escape(getattr(getattr(s, "problem", None), "name", "") or "")
            self.title.value = f"<b>stitch</b> session <code>{sid}</code> · {name}"
            self.status.value = f"phase: <b>{html.escape(ph or 'new')}</b>&nbsp;&nbsp;"
            err = bridge.error(s)
            if err:
                self._show_error(f"The session failed: {err}",
                                 "its events are kept: fix the cause, then %stitch_open "
                                 f"{getattr(s, 'id', '')} starts where it stopped")
            self._refresh_plan()
            self._refresh_kernels()
            self._refresh_profile()
            self._refresh_history()
            self._refresh_summary()
            self._update_buttons()

    def _refresh_summary(self) -> None:
        s = self.session
        self.summary.value = summary_html(s)
        if not self._detached:
            self.next_step.value = f"<div class='stitch-next'>▶ {next_step_html(self)}</div>"

    def _update_buttons(self) -> None:
        why = bridge.superseded(self.session)
        if why and not self._detached:
            self.detach(f"no longer in charge: {why}")
        if self._detached:
            return
        busy, s = self.busy, self.session
        ph = bridge.phase(s)
        done = bridge.is_done(s)
        sel = self.selected()
        edits = self.edited_kernels()
        self.plan_approve.disabled = busy or ph != "planned"
        self.kernel_approve.disabled = busy or sel is None or done or not (
            edits or sel.id in bridge.pending(s))
        self.kernel_approve.description = "Approve edit" if edits else "Approve"
        self.kernel_discard.disabled = busy or not edits
        self.kernel_regen.disabled = busy or ph not in ("coded", "verified")
        # a recording replayed to its end cannot go further (next_step_html says so)
        self.next_button.disabled = busy or ph not in (
            "coded", "verified", "plan_approved", "refining", "candidate_approved") \
            or isinstance(self.last_exception, ReplayExhausted)
        self.stop_button.disabled = busy
        # once stopped there is nothing to stop: the button exports again (another path, say)
        self.stop_button.description = "Export" if done else "Stop and export"
        self.model_button.disabled = busy or _best(s) is None
        self._refresh_draft_note(sel, edits)

    # Plan tab
    def _refresh_plan(self) -> None:
        p = bridge.plan(self.session)
        if p is None:
            self.plan_notes.value = "<i>No plan yet: the Planner runs on the first advance.</i>"
            self.plan_rows.children = ()
            self._task_rows = []
            return
        if self._task_rows and [r.task for r in self._task_rows] == p.tasks and \
                all(r.locked == p.approved for r in self._task_rows):
            return        # unchanged: keep what the person is typing in the rows
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in p.notes)
        state = "approved" if p.approved else "waiting for your approval"
        self.plan_notes.value = (f"<b>Plan</b> by the {html.escape(p.agent)} planner for "
                                 f"<code>{html.escape(p.device)}</code> — {state}"
                                 + (f"<ul>{notes}</ul>" if notes else ""))
        self._task_rows = [_TaskRow(t, self._move, editable=not p.approved,
                                    editor=self.editor_kind) for t in p.tasks]
        self._layout_task_rows()

    def _layout_task_rows(self) -> None:
        n = len(self._task_rows)
        for i, r in enumerate(self._task_rows):
            r.index = i
            r.up.disabled = i == 0 or r.locked
            r.down.disabled = i == n - 1 or r.locked
        self.plan_rows.children = [r.widget for r in self._task_rows]

    def _move(self, row: _TaskRow, delta: int) -> None:
        i = self._task_rows.index(row)
        j = i + delta
        if 0 <= j < len(self._task_rows):
            rows = self._task_rows
            rows[i], rows[j] = rows[j], rows[i]
            self._layout_task_rows()

    def edited_plan(self) -> Plan:
        """The plan as the person left it: order, approve/skip, technique and params edits."""
        p = bridge.plan(self.session)
        if p is None:
            raise StitchError("there is no plan to approve yet")
        tasks = [r.edited() for r in self._task_rows]
        return dataclasses.replace(p, tasks=tasks)

    # Kernels tab
    def _refresh_kernels(self) -> None:
        s = self.session
        cs = bridge.candidates(s)
        vs = bridge.verdicts(s)
        best = _best(s)
        options = self._version_options(cs, vs, best)
        ids = [c.id for c in cs]
        if self._selected not in ids or self._follow_latest:
            # the newest candidate follows new results unless the person picked an older one
            self._selected = ids[-1] if ids else None
        self.version.unobserve(self._on_version, names="value")
        self.version.options = options
        self.version.value = self._selected
        self.version.observe(self._on_version, names="value")
        self._draw_candidate()

    def _on_version(self, change: dict) -> None:
        self._selected = change["new"]
        ids = [c.id for c in bridge.candidates(self.session)]
        self._follow_latest = bool(ids) and change["new"] == ids[-1]
        self._draw_candidate()
        self._refresh_profile()
        self._update_buttons()

    def select(self, candidate_id: str) -> None:
        """Show ``candidate_id`` in the Kernels and Profile tabs (what the version menu does)."""
        if candidate_id not in [c.id for c in bridge.candidates(self.session)]:
            raise StitchError(f"no candidate {candidate_id!r} in this session")
        self.version.value = candidate_id

    def selected(self) -> Candidate | None:
        for c in bridge.candidates(self.session):
            if c.id == self._selected:
                return c
        return None

    def _draw_candidate(self) -> None:
        c = self.selected()
        v = bridge.verdict_for(self.session, c)
        done = bridge.is_done(self.session)
        key = (c.id if c else None, v.status if v else None, (v.build_log if v else ""), done)
        if key == self._drawn:
            return            # unchanged: the editors (and the cursor in them) stay as they are
        self._drawn = key
        self._editors = {}
        if c is None:
            self.kernel_box.children = (W.HTML("<i>No candidate yet: approve the plan first.</i>"),)
            return
        prev = bridge.previous(self.session, c)
        prev_code = {k.name: k.code for k in prev.kernels} if prev else {}
        log = (v.build_log if v else "") or ""
        diags = diagnostics.parse(log, [k.name for k in c.kernels],
                                  lines={k.name: k.code.count("\n") + 1 for k in c.kernels})
        drafts = self._drafts.get(c.id, {})
        head = (f"<b>{html.escape(str(c))}</b>"
                + (f"<br><small>parent <code>{html.escape(c.parent)}</code></small>"
                   if c.parent else "")
                + (f"<div class='stitch-notes'>{html.escape(c.notes)}</div>" if c.notes else ""))
        items: list[W.Widget] = [W.HTML(head)]
        if done and c.kernels:   # typing does nothing: say so before anyone tries
            items.append(W.HTML(
                "<div class='stitch-draft'>The session has finished, so its kernels are "
                "read-only here: a new <code>%%stitch</code> session edits and verifies further, "
                "and <b>Export</b> writes out the best program.</div>"))
        for k in c.kernels:
            mine = [d.to_dict() for d in diags if d.kernel == k.name]
            text = drafts.get(k.name, k.code)
            ed = make_editor(text, lang=k.lang, original=prev_code.get(k.name), diagnostics=mine,
                             read_only=done, kind=self.editor_kind,
                             focus_line=_focus_line(text, k, mine, prev_code.get(k.name)))
            ed.add_class("stitch-kernel-editor")
            ed.observe(lambda ch, c_id=c.id, name=k.name: self._on_typed(c_id, name, ch["new"]),
                       names="value")
            self._editors[k.name] = ed
            items.append(W.HTML(
                f"<b>{html.escape(k.name)}</b> <small>({html.escape(k.lang)}; entry "
                f"{html.escape(', '.join(k.entry) or '-')}; {k.code.count(chr(10)) + 1} lines"
                + (f"; diff against <code>{html.escape(prev.id)}</code> shown inline"
                   if prev and k.name in prev_code and prev_code[k.name] != k.code
                   and hasattr(ed, "show_diff") else "") + ")</small>"))
            items.append(ed)
            if mine:
                items.append(W.HTML(_diagnostics_html(mine)))
            if not hasattr(ed, "show_diff"):    # a textarea: the diff as text below it
                items.append(W.HTML(_diff_html(prev_code.get(k.name), k.code, k.name,
                                               prev.id if prev else None, c.id)))
        if not c.kernels:
            items.append(W.HTML("<i>This candidate has no kernels of its own.</i>"))
        failed_build = v is not None and v.status == "build_error"
        items.append(W.HTML(
            f"<details{' open' if failed_build else ''}><summary>compile log"
            f"{' (the build failed: the messages are marked on their lines above)' if diags else ''}"
            f"</summary><pre class='stitch-log' style='font-family:{_MONO};font-size:11px;"
            f"max-height:240px;overflow:auto'>{html.escape(log) or '(empty)'}</pre></details>"))
        self.kernel_box.children = items

    def _version_options(self, cs: list, vs: dict, best: Any) -> list[tuple[str, str]]:
        s = self.session
        options = []
        for c in cs:
            v = vs.get(c.id)
            label = (f"{c.id} · iter {c.iteration} · {c.origin}"
                     + (f" (edit of {c.parent})" if c.origin == "user" and c.parent else "")
                     + f" · {v.status if v else _waiting(s, c)}"
                     + (" · ★ best" if best and best[0].id == c.id else "")
                     + (" · ✎ unsaved edits" if self._draft_edits(c) else ""))
            options.append((label, c.id))
        return options

    def _relabel_versions(self) -> None:
        """The dropdown's labels again (its "unsaved edits" mark follows typing), the value
        and the editors left as they are."""
        options = self._version_options(bridge.candidates(self.session),
                                        bridge.verdicts(self.session), _best(self.session))
        if options != list(self.version.options):
            self.version.unobserve(self._on_version, names="value")
            value = self.version.value
            self.version.options = options
            self.version.value = value
            self.version.observe(self._on_version, names="value")

    def _on_typed(self, candidate_id: str, name: str, text: str) -> None:
        c = next((x for x in bridge.candidates(self.session) if x.id == candidate_id), None)
        original = next((k.code for k in c.kernels if k.name == name), None) if c else None
        d = self._drafts.setdefault(candidate_id, {})
        if text == original:
            d.pop(name, None)
        else:
            d[name] = text
        if not d:
            self._drafts.pop(candidate_id, None)
        self._keep_drafts()
        self._relabel_versions()
        self._update_buttons()

    def _keep_drafts(self) -> None:
        """The typed text into the session folder (a kernel restart loses none of it)."""
        try:
            bridge.save_drafts(self.session, self._drafts)
        except StitchError as e:
            self._show_error(f"Your typing is not saved to disk: {e}", e.hint or "")

    def _draft_edits(self, c: Candidate) -> dict[str, str]:
        code = {k.name: k.code for k in c.kernels}
        return {n: t for n, t in self._drafts.get(c.id, {}).items()
                if n in code and t != code[n]}

    def _refresh_draft_note(self, sel: Candidate | None, edits: dict[str, str]) -> None:
        if sel is None or not edits:
            self.draft_note.value = ""
            return
        code = {k.name: k.code for k in sel.kernels}
        parts = []
        for name, text in edits.items():
            ops = difflib.SequenceMatcher(None, code[name].splitlines(), text.splitlines(),
                                          autojunk=False).get_opcodes()
            changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")
            parts.append(f"<code>{html.escape(name)}</code> ({changed} line(s) changed)")
        if bridge.is_done(self.session):
            tail = ("the session has finished, so it cannot verify edits any more; start a new "
                    "<code>%%stitch</code> session to try them")
        else:
            tail = (f"<b>Approve edit</b> verifies your code as a new version under "
                    f"<code>{html.escape(sel.id)}</code>; <b>Discard edits</b> puts "
                    f"<code>{html.escape(sel.id)}</code>'s code back")
        self.draft_note.value = (f"<div class='stitch-draft'>✎ You edited {', '.join(parts)}: "
                                 f"{tail}.</div>")

    def edit_kernel(self, name: str, code: str) -> None:
        """Put ``code`` in kernel ``name``'s editor (what typing in it does); then Approve."""
        if name not in self._editors:
            raise StitchError(f"the shown candidate has no kernel {name!r}",
                              hint=f"kernels: {', '.join(self._editors) or '(none)'}")
        self._editors[name].value = code

    def edited_kernels(self) -> dict[str, str]:
        """Kernels whose editor text differs from the selected candidate's code."""
        c = self.selected()
        return self._draft_edits(c) if c is not None else {}

    def discard_edits(self) -> None:
        """Put the shown candidate's code back in its editors."""
        c = self.selected()
        if c is None:
            return
        self._drafts.pop(c.id, None)
        for k in c.kernels:
            if k.name in self._editors:
                self._editors[k.name].value = k.code
        self._keep_drafts()
        self._update_buttons()

    # Profile tab
    def _refresh_profile(self) -> None:
        c = self.selected()
        v = bridge.verdict_for(self.session, c)
        note = ""
        if v is None:
            # the newest candidate may still await its verdict: show the latest one there is
            done = [x for x in bridge.candidates(self.session)
                    if bridge.verdict_for(self.session, x) is not None]
            if done:
                v = bridge.verdict_for(self.session, done[-1])
                note = (f"<div><i>{html.escape(c.id if c else '')} is not verified yet; "
                        f"showing the latest verdict ({html.escape(done[-1].id)}).</i></div>")
        if v is None:
            self.verdict_html.value = "<i>No verdict yet.</i>"
            for out in (self.timeline_out, self.kernels_out, self.ncu_out):
                out.outputs = ()
            self.ncu_note.value = self.profile_note.value = self.kernel_table.value = ""
            self.figures = {k: f for k, f in self.figures.items() if k == "history"}
            return
        self.verdict_html.value = note + verdict_html(v)
        prof = v.profile or {}
        if v.status != "pass" and not any(figures.timeline_rows(prof).values()):
            for out in (self.timeline_out, self.kernels_out, self.ncu_out):
                out.outputs = ()
            self.figures = {k: f for k, f in self.figures.items() if k == "history"}
            self.ncu_note.value = self.kernel_table.value = ""
            self.profile_note.value = (
                f"<i>No timeline for {html.escape(v.candidate_id)}: the Verifier times and "
                f"profiles a candidate only after it passes ({html.escape(v.status)} here).</i>")
            return
        shown = next((x for x in bridge.candidates(self.session) if x.id == v.candidate_id), c)
        work = figures.kernel_work(getattr(self.session, "graph", None),
                                   bridge.plan(self.session), shown)
        self.profile_note.value = figures.agreement_html(prof, v.timings)
        self.figures["timeline"] = figures.timeline_figure(
            prof, timings=v.timings, title=f"Timeline · reference vs {v.candidate_id}")
        self.figures["kernels"] = figures.kernel_figure(prof)
        self.kernel_table.value = figures.kernel_table_html(
            prof, work=work, ceilings=figures.ceilings(prof)) + figures.samples_html(prof)
        self.figures.pop("ncu", None)
        _show(self.timeline_out, self.figures["timeline"])
        _show(self.kernels_out, self.figures["kernels"])
        ncu = prof.get("ncu") or {}
        fig = figures.ncu_figure(ncu)
        if fig is None:
            self.ncu_out.outputs = ()
            self.ncu_note.value = f"<i>{html.escape(figures.ncu_note(ncu, v.device) or '')}</i>"
        else:
            self.figures["ncu"] = fig
            self.ncu_note.value = ""
            _show(self.ncu_out, fig)

    # History tab
    def _refresh_history(self) -> None:
        pts = bridge.history(self.session)
        self.figures["history"] = figures.history_figure(pts)
        _show(self.history_out, self.figures["history"])
        self.versions_html.value = versions_html(self.session)

    # ---- actions --------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._busy

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running step ends; True when nothing is running any more."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return not self.busy

    def approve_plan(self) -> None:
        try:
            edited = self.edited_plan()
        except StitchError as e:
            self._show_error(e.message, e.hint)
            return
        self._run("Coding and verifying the plan",
                  lambda: bridge.approve_plan(self.session, edited))

    def approve_candidate(self) -> None:
        """Verify the shown candidate; with edited editors, verify the edit instead (a new
        version), never the code the editors no longer show."""
        c = self.selected()
        if c is None:
            return
        if self.edited_kernels():
            self.verify_edit()
            return
        if c.id not in bridge.pending(self.session):
            v = bridge.verdict_for(self.session, c)
            self._notify(f"{c.id} was verified already ({v.status if v else 'waiting'}): edit a "
                         "kernel and press Approve edit to verify a new version, or Run next "
                         "iteration.")
            return
        self._run(f"Verifying {c.id}", lambda: bridge.approve_candidate(self.session, c))

    def verify_edit(self) -> None:
        """Verify the editors' text as a new version under the shown candidate, and show it."""
        c = self.selected()
        edits = self.edited_kernels()
        if c is None:
            return
        if not edits:
            self._notify("No kernel was edited: change a kernel's code, then Approve edit.")
            return
        new = bridge.edited(c, edits)
        if new.id in bridge.verdicts(self.session):
            # the same edit of the same version was verified before: show that version
            self._drafts.pop(c.id, None)
            self._keep_drafts()
            self._follow_latest = False
            self.select(new.id)
            self._notify(f"This edit of {c.id} was verified before: it is version {new.id}.")
            return

        # the same code as another version (a sibling's kernel pasted in, an edit that undoes
        # the parent's change): still a version of its own under c, verified on fresh inputs,
        # but the person is told which version it repeats and how that one fared
        twin = next((x for x in bridge.candidates(self.session)
                     if x.id != c.id and x.digest() == new.digest()), None)

        def go() -> None:
            bridge.post_edited(self.session, new)
            self._drafts.pop(c.id, None)        # posted: the edit is a version of its own now
            self._keep_drafts()
            self._selected, self._follow_latest = new.id, True
        self._run(f"Verifying your edit of {c.id}", go)
        if twin is not None:
            v = bridge.verdict_for(self.session, twin)
            fared = (f"{v.status}" + (f", {v.speedup_vs_eager:.2f}x vs eager"
                                      if getattr(v, "speedup_vs_eager", None) else "")
                     if v else "not verified yet")
            self._notify(f"Your edit gives the same code as version {twin.id} ({fared}); it is "
                         f"verified again as a version of its own under {c.id}.")

    def regenerate(self) -> None:
        self._run("Regenerating", lambda: bridge.regenerate(self.session))

    def next_iteration(self) -> None:
        # a round ends on its last candidate, often not its best: the tabs show the best,
        # which the header names
        self._run("Running the next iteration", lambda: bridge.next_iteration(self.session),
                  select_best=True)

    def stop_and_export(self) -> None:
        target = self.export_path.value.strip() or str(Path(self.session.dir) / "export")

        def go() -> None:
            if not bridge.is_done(self.session):
                bridge.stop(self.session)
            self.exported = Path(self.session.export(target))
            sv = self.names.get("session")
            again = (f"<code>{html.escape(sv)}.model()</code> loads the best candidate"
                     if sv else "<b>Load finished model</b> loads the best candidate here")
            self.export_html.value = (f"Exported to <code>{html.escape(str(self.exported))}"
                                      f"</code>; {again}.")
        self._run("Stopping and exporting", go, advance=False)

    def load_model(self) -> None:
        def go() -> None:
            self.model = self.session.model()
            best = _best(self.session)
            what = (f"{html.escape(best[0].id)} as a module "
                    f"(<code>{html.escape(type(self.model).__name__)}</code>)" if best else "")
            self.export_html.value = f"Loaded the best candidate {what}. {self.where_model()}"
        self._run("Loading the finished model", go, advance=False)

    def where_model(self) -> str:
        """Where code finds the loaded model, naming only variables that exist."""
        pv, sv = self.names.get("panel"), self.names.get("session")
        sid = html.escape(str(getattr(self.session, "id", "")))
        if pv:
            out = f"In code it is <code>{html.escape(pv)}.model</code>"
            return out + (f"; <code>{html.escape(sv)}.model()</code> builds a fresh one."
                          if sv else ".")
        if sv:
            return f"In code, <code>{html.escape(sv)}.model()</code> builds the same module."
        return ("To use it in code, keep the session in a variable: <code>%stitch_open "
                f"{sid} -o s</code>, then <code>s.model()</code>.")

    def detach(self, why: str) -> None:
        """Stop driving the session (it was closed here): every button off, the reason shown."""
        self._detached = why
        for b in self._buttons:
            b.disabled = True
        self.next_step.value = (f"<div class='stitch-next'><span class='stitch-paused'></span>"
                                f"This panel is {html.escape(why)}.</div>")

    def advance(self) -> None:
        """Let the Session run until it needs a person (in the background)."""
        self._run("Working", lambda: None)

    def _run(self, label: str, action: Callable[[], Any], *, advance: bool = True,
             select_best: bool = False) -> None:
        """Do ``action`` (post an event), then let the Session advance, in the background
        unless ``threaded`` is off. Errors go to the error box; ``last_exception`` keeps the
        last one so a caller running inline can re-raise it. ``select_best``: once done, the
        Kernels and Profile tabs show the best candidate, unless the person picked another
        one meanwhile."""
        why = bridge.superseded(self.session)
        if why and not self._detached:
            self.detach(f"no longer in charge: {why}")
        if self._detached:
            self._notify(f"This panel is {self._detached}.")
            return
        if self.busy:
            self._notify(f"“{self._step}” is still running; wait for it to finish.")
            return
        self.last_exception = None
        self._busy, self._step = True, label
        self._clear_error()
        self._clear_notice()
        self._set_progress(label, 0.0)
        for b in self._buttons:
            b.disabled = True
        self.next_step.value = (f"<div class='stitch-next'><span class='stitch-spinner'></span>"
                                f"{html.escape(label)} …</div>")
        hook = _install_progress(self.session, self._on_progress)

        def work() -> None:
            ok = False
            try:
                following = self._follow_latest
                failed = len(bridge.failures(self.session))
                action()
                if advance and not bridge.is_done(self.session):
                    self.session.advance()
                ok = True
                # a try that came to nothing leaves the session where it was: say why, or the
                # step reads "done" and nothing seems to have happened
                new = bridge.failures(self.session)[failed:]
                if new:
                    self._notify("; ".join(f"Iteration {f['iteration']}: {f['reason']}"
                                           for f in new))
                best = _best(self.session) if select_best else None
                if best is not None and following and self._follow_latest:
                    ids = [c.id for c in bridge.candidates(self.session)]
                    self._selected, self._follow_latest = best[0].id, best[0].id == ids[-1]
            except StitchError as e:
                self.last_exception = e
                self._show_error(e.message, e.hint)
            except Exception as e:  # noqa: BLE001 - every failure must reach the person
                self.last_exception = e
                self._show_error(f"{type(e).__name__}: {e}", detail=traceback.format_exc())
            finally:
                hook()
                self._busy = False
                self._finish_progress(label, ok)
                try:
                    self.refresh()
                except Exception as e:  # noqa: BLE001
                    self._show_error(f"the panel could not redraw: {e}",
                                     detail=traceback.format_exc())

        if self.threaded:
            self._thread = threading.Thread(target=work, name="stitch-panel", daemon=True)
            self._thread.start()
        else:
            work()

    # ---- progress, notices and errors -----------------------------------------------------

    def _on_progress(self, *args: Any, **kw: Any) -> None:
        """Accepts ``(message)``, ``(message, fraction)`` or ``(message, done, total)``.

        The bar shows the running step: "verifying X (2/3)" counts that step's candidates;
        a fraction of the whole session is shown only when it moves the bar forward."""
        msg = kw.get("message") or next((a for a in args if isinstance(a, str)), "")
        nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        frac = kw.get("fraction")
        if frac is None and "done" in kw and kw.get("total"):
            frac = kw["done"] / kw["total"]
        if frac is None and len(nums) >= 2 and nums[1]:
            frac = nums[0] / nums[1]
        elif frac is None and len(nums) == 1:
            frac = nums[0]
        m = re.search(r"\((\d+)/(\d+)\)", msg)
        if m and int(m[2]):
            frac = (int(m[1]) - 1) / int(m[2])     # the i-th of n has started
        if frac is not None and frac < self.progress.value / 100:
            frac = None                            # never move backwards within a step
        self._set_progress(msg, frac)

    def _set_progress(self, message: str, fraction: float | None) -> None:
        self.progress_label.value = message
        self.progress.layout.visibility = "visible"
        self.progress.bar_style = "info"
        if fraction is not None:
            self.progress.value = int(max(0.0, min(1.0, float(fraction))) * 100)

    def _finish_progress(self, label: str, ok: bool) -> None:
        """The step's end: the bar at 100% and what happened, until the next step starts."""
        self.progress.value = 100
        self.progress.bar_style = "success" if ok else "danger"
        waits = _waits_for(self.session) if ok else None
        self.progress_label.value = (f"{label}: {waits}" if waits else
                                     f"{label}: {'done' if ok else 'failed (see the error)'}")

    def _show_error(self, message: str, hint: str | None = None, detail: str | None = None) -> None:
        body = f"<b>Error:</b> {html.escape(message)}"
        if hint:
            body += f"<br><b>Hint:</b> {html.escape(hint)}"
        if detail:
            body += (f"<details><summary>details</summary><pre style='font-size:11px'>"
                     f"{html.escape(detail)}</pre></details>")
        self.error_box.value = (f"<div class='stitch-error' style='border:1px solid #cf222e;"
                                f"background:#ffebe9;color:#82071e;padding:6px 10px;"
                                f"border-radius:4px'>{body}</div>")
        self.error_box.layout.display = None

    def _clear_error(self) -> None:
        self.error_box.value = ""
        self.error_box.layout.display = "none"

    def _notify(self, message: str) -> None:
        """A note for the person (not an error); cleared when the next step starts."""
        self.notice.value = (f"<div class='stitch-notice' style='border:1px solid #d4a72c;"
                             f"background:#fff8c5;padding:4px 10px;border-radius:4px'>"
                             f"{html.escape(message)}</div>")
        self.notice.layout.display = None

    def _clear_notice(self) -> None:
        self.notice.value = ""
        self.notice.layout.display = "none"

    @property
    def error(self) -> str:
        """The error box's text ('' when there is none)."""
        return _plain(self.error_box.value)

    @property
    def note(self) -> str:
        """The notice line's text ('' when there is none)."""
        return _plain(self.notice.value)


class _TaskRow:
    """One Task in the Plan tab: approve checkbox, ops, share, technique/params edits, order."""

    def __init__(self, task: Task, move: Callable[[_TaskRow, int], None], *, editable: bool,
                 editor: str = "auto"):
        self.task = task
        self.index = 0
        self.locked = not editable
        keep = task.kind == "keep"
        self.approve = W.Checkbox(value=task.status != "skipped", indent=False,
                                  description="", layout=W.Layout(width="28px"),
                                  disabled=not editable or keep)
        # a text area that shows the whole technique (a one-line box cut long ones off
        # mid-word: "... (row kernel (32 rc…"), as many rows as it takes at about 60 chars
        self.technique = W.Textarea(value=task.technique, placeholder="technique",
                                    rows=max(1, min(4, -(-len(task.technique) // 60))),
                                    layout=W.Layout(flex="1 1 auto", min_width="320px"),
                                    disabled=not editable)
        self.params = make_editor(json.dumps(task.params or {}, indent=1),
                                  lang="json", read_only=not editable, height="auto",
                                  kind=editor)
        self.params.layout = W.Layout(width="260px", min_height="30px")
        self.params.add_class("stitch-params")
        self.up = W.Button(icon="arrow-up", tooltip="move up", layout=W.Layout(width="34px"))
        self.down = W.Button(icon="arrow-down", tooltip="move down", layout=W.Layout(width="34px"))
        self.up.on_click(lambda _: move(self, -1))
        self.down.on_click(lambda _: move(self, +1))
        info = (f"<b>{html.escape(task.id)}</b> <code>{html.escape(task.kind)}</code> "
                f"· {task.share:.0%} of eager time · [{html.escape(task.status)}]<br>"
                f"ops: <code>{html.escape(', '.join(task.ops) or '-')}</code>"
                + (f"<br><small>why: {html.escape(task.reason)}</small>" if task.reason else "")
                + _refs_html(task.refs))
        self.widget = W.VBox([
            W.HBox([self.approve, W.HTML(info, layout=W.Layout(flex="1"))]),
            W.HBox([W.HTML("&nbsp;" * 6), self.technique, W.HTML("params"), self.params,
                    self.up, self.down], layout=W.Layout(width="100%")),
        ], layout=W.Layout(border="1px solid #d0d7de", padding="4px", margin="2px 0"))

    def edited(self) -> Task:
        params = self.task.params
        raw = self.params.value.strip()
        if raw:
            try:
                params = json.loads(raw)
            except json.JSONDecodeError as e:
                from ..errors import PlanError
                raise PlanError(f"task {self.task.id}: params are not valid JSON ({e.msg} at "
                                f"line {e.lineno}, column {e.colno})",
                                hint='write them like {"block": 256, "vec": 4}') from None
            if not isinstance(params, dict):
                from ..errors import PlanError
                raise PlanError(f"task {self.task.id}: params must be a JSON object",
                                hint='write them like {"block": 256}')
        else:
            params = {}
        status = self.task.status
        if self.task.kind != "keep":
            # unticked is skipped; ticked keeps its status (approving the plan approves it),
            # so a plan the person left alone posts no edit
            status = ("skipped" if not self.approve.value else
                      "proposed" if status == "skipped" else status)
        return dataclasses.replace(self.task, technique=self.technique.value.strip(),
                                   params=params, status=status)


def _refs_html(refs: list[str]) -> str:
    if not refs:
        return ""
    items = []
    for ref in refs:
        title, snippet = _rag_lookup(ref)
        label = f"<code>{html.escape(ref)}</code>"
        if title:
            label += f" {html.escape(title)}"
        if snippet:
            label = f"<span title='{html.escape(snippet, quote=True)}'>{label}</span>"
        items.append(label)
    return "<br><small>cites: " + "; ".join(items) + "</small>"


def _rag_lookup(ref: str) -> tuple[str | None, str | None]:
    """(title, snippet) of a rag_docs section when the knowledge base can be loaded."""
    kb = _knowledge_base()
    if kb is None or ref not in kb:
        return None, None
    sec = kb.section(ref)
    return sec.title, " ".join(sec.body.split())[:240] or None


_KB: list[Any] = []


def _knowledge_base() -> Any:
    if not _KB:
        try:
            from ..agents.rag import KnowledgeBase
            _KB.append(KnowledgeBase.load())
        except Exception:  # noqa: BLE001 - the knowledge base is optional for the view
            _KB.append(None)
    return _KB[0]


# ---- what the panel says ------------------------------------------------------------------

def _waiting(session: Any, c: Candidate) -> str:
    if c.id in bridge.pending(session):
        return "waiting for approval"
    if c.id in (getattr(session.state, "approved", None) or []):
        return "being verified"
    return "set aside"


def _waits_for(session: Any) -> str | None:
    """What the session waits for from the person after a step, if it stopped for approval."""
    needs = bridge.needs(session)
    if needs == "approve_candidate":
        n = len(bridge.pending(session))
        return (f"coded; {'the kernels wait' if n != 1 else 'the kernel waits'} for your "
                "approval in Kernels")
    if needs == "approve_plan":
        return "the plan waits for your approval in Plan"
    return None


def _counts(session: Any) -> str:
    vs = bridge.verdicts(session)
    by: dict[str, int] = {}
    for v in vs.values():
        by[v.status] = by.get(v.status, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(by.items(), key=lambda kv: -kv[1]))


def summary_html(session: Any) -> str:
    """Which candidate is best and why; why the session stopped, when it did."""
    vs = bridge.verdicts(session)
    best = _best(session)
    parts = []
    ph = bridge.phase(session)
    kept = _kept_reason(session) if ph in ("done", "stopped") or best is not None else None
    if ph in ("done", "stopped"):
        why = bridge.message(session) or ("stopped by you" if ph == "stopped" else "finished")
        parts.append(f"<b>Session {html.escape(ph)}:</b> {html.escape(why.rstrip('.'))}.")
    if best is not None:
        c, v = best
        passing = [x for x in vs.values() if x.status == "pass"]
        sp = (f"{v.speedup_vs_eager:.2f}x vs eager" if v.speedup_vs_eager is not None
              else "speed not measured")
        if v.speedup_vs_compile is not None:
            sp += f", {v.speedup_vs_compile:.2f}x vs torch.compile"
        why = ("the only candidate that passed" if len(passing) == 1 else
               f"the fastest of {len(passing)} passing candidates")
        origin = ("your edit" if c.origin == "user" else f"{c.origin}, iteration {c.iteration}"
                  + (", a variant of your edit" if c.params.get("hand_edit") else ""))
        slower = (" It is not faster than eager PyTorch: keeping the reference is the honest "
                  "result." if (v.speedup_vs_eager or 0) <= 1.0 and not kept else "")
        faster = sorted(((x.speedup_vs_eager, x.candidate_id) for x in passing
                         if load_changed(x.flags) and x.speedup_vs_eager is not None
                         and x.speedup_vs_eager > (v.speedup_vs_eager or 0.0)), reverse=True)
        unsteady = (f" <code>{html.escape(faster[0][1])}</code> measured {faster[0][0]:.2f}x "
                    "while the host's load moved‡, which ranks below every steady verdict: "
                    "verify it again on a quieter host to count it." if faster else "")
        steady = sum(not load_changed(x.flags) for x in passing)
        if faster and not load_changed(v.flags):
            why = (f"the fastest of {steady} passing candidate{'s' if steady > 1 else ''} "
                   "timed under a steady load")
        parts.append(f"<b>Best:</b> <code>{html.escape(c.id)}</code> ({html.escape(origin)}): "
                     f"{html.escape(sp)}{_retimed_mark(v)}, verified correct on "
                     f"{len(v.trials)} trial(s); "
                     f"{why} ({html.escape(_counts(session))}).{slower}{unsteady}")
    elif vs:
        parts.append(f"<b>No candidate has passed yet</b> ({html.escape(_counts(session))}): "
                     "a failed candidate is never a result.")
    if kept:
        parts.append(f"<b>Reference kept:</b> {html.escape(kept)}.")
    return ("<div class='stitch-summary'>" + " ".join(parts) + "</div>") if parts else ""


def next_step_html(panel: SessionPanel) -> str:
    """What the person can do now, in one sentence."""
    s = panel.session
    needs, ph = bridge.needs(s), bridge.phase(s)
    sv = panel.names.get("session")
    if ph == "failed":
        return ("The session failed (see the error). Its events are kept: "
                f"<code>%stitch_open {html.escape(str(s.id))}</code> reopens it.")
    if ph not in ("done", "stopped") and isinstance(panel.last_exception, ReplayExhausted):
        return ("The recording ends here: every recorded exchange has been replayed, so "
                "<b>Run next iteration</b> cannot go further. Next: <b>Stop and export</b> keeps "
                "the best; a live agent (<code>--agent claude</code> with an API key) goes on "
                "in a new session.")
    if ph in ("done", "stopped"):
        use = (f"<code>{html.escape(sv)}.model()</code> or <b>Load finished model</b>" if sv
               else "<b>Load finished model</b>")
        sid = html.escape(str(getattr(s, "id", "")))
        later = (f"<code>%stitch_open {sid}</code> reopens it to look at; a new "
                 "<code>%%stitch</code> session tries further")
        if panel.exported is not None:
            where = f"<code>{html.escape(str(panel.exported))}</code>"
            head = (f"The session is {html.escape(ph)}; " +
                    (f"the best candidate is exported to {where}. Next: {use} gives it as a "
                     "module; " if _best(s) else
                     f"it is exported to {where}, but no candidate passed; "))
            return head + f"the session does not carry on: {later}."
        if not _best(s):
            return ("Nothing passed: change the plan or the kernels in a new <code>%%stitch</code> "
                    "session.")
        button = "Export" if bridge.is_done(s) else "Stop and export"   # as the button says
        return (f"Next: <b>{button}</b> writes the best candidate as a KernelBench "
                f"file; {use} gives it as a module.")
    if needs == "approve_plan":
        return ("Next: check the tasks in <b>Plan</b> (untick, reorder, edit technique or "
                "params), then press <b>Approve plan</b>.")
    if needs == "approve_candidate":
        waiting = [c for c in bridge.candidates(s) if c.id in bridge.pending(s)]
        ids = ", ".join(f"<code>{html.escape(c.id)}</code>" for c in waiting)
        return (f"Next: {ids} {'waits' if len(waiting) == 1 else 'wait'} in <b>Kernels</b>: "
                "press <b>Approve</b> to verify (or edit the code first: the button becomes "
                "<b>Approve edit</b> and verifies your version), or <b>Run next iteration</b> "
                "to verify everything waiting.")
    if needs == "next":
        it = getattr(getattr(s, "state", None), "iteration", None)
        iters = getattr(getattr(s, "settings", None), "iters", None)
        if isinstance(it, int) and isinstance(iters, int) and it >= iters:
            # the person may go on; the line says the session's own count is reached
            runs = f"{iters} refine iteration" + ("s this session was started with are"
                                                  if iters != 1 else
                                                  " this session was started with is")
            return (f"The {runs} done. Next: <b>Stop and export</b> keeps the best; <b>Run "
                    "next iteration</b> refines once more; or edit a kernel in <b>Kernels</b> "
                    "and <b>Approve edit</b>.")
        return ("Next: <b>Run next iteration</b> lets the Coder refine from the verdicts; or "
                "edit a kernel in <b>Kernels</b> and <b>Approve edit</b>; or <b>Stop and "
                "export</b>.")
    if ph == "new":
        return "The Planner runs first: its plan appears in <b>Plan</b>."
    if needs in ("code", "verify"):
        doing = {"code": "writing candidates", "verify": "verifying"}[needs]
        return (f"The session stopped while {doing} (a restart or an error): <b>Run next "
                "iteration</b> carries on from there.")
    return "Nothing to do."


def versions_html(session: Any) -> str:
    """Every version as a tree: each row under its parent, edits marked as yours."""
    cs = bridge.candidates(session)
    if not cs:
        return "<i>No versions yet.</i>"
    vs = bridge.verdicts(session)
    best = _best(session)
    ids = {c.id for c in cs}
    children: dict[str | None, list[Candidate]] = {}
    for c in cs:
        children.setdefault(c.parent if c.parent in ids else None, []).append(c)
    rows: list[str] = []

    def walk(parent: str | None, depth: int, seen: set[str]) -> None:
        kids = [c for c in children.get(parent, []) if c.id not in seen]
        for n, c in enumerate(kids):
            if c.id in seen:
                continue            # the loop keeps versions a tree; a view never loops
            seen.add(c.id)
            v = vs.get(c.id)
            star = "★" if best and best[0].id == c.id else ""
            sp = (f"{v.speedup_vs_eager:.2f}x{_retimed_mark(v)}" if v
                  and v.speedup_vs_eager is not None else "-")
            what = ("your edit" if c.origin == "user"
                    else str(c.params.get("variant", "")) if isinstance(c.params, dict) else "")
            if not what and c.notes:   # an LLM coder's candidate: the first line of its notes
                first = c.notes.strip().splitlines()[0]
                what = first if len(first) <= WHAT_SHOWN else first[:WHAT_SHOWN - 1] + "…"
            glyph = ("└ " if n == len(kids) - 1 else "├ ") if depth else ""
            indent = "&nbsp;&nbsp;&nbsp;" * depth + glyph
            rows.append(f"<tr><td>{star}</td><td style='white-space:nowrap'>{indent}"
                        f"<code>{html.escape(c.id)}</code></td>"
                        f"<td>{c.iteration}</td><td>{html.escape(c.origin)}</td>"
                        f"<td>{html.escape(c.parent or '-')}</td>"
                        f"<td style='white-space:nowrap'>"
                        f"{html.escape(v.status if v else _waiting(session, c))}</td>"
                        f"<td style='white-space:nowrap'>{sp}</td>"
                        f"<td><small>{html.escape(what)}</small></td></tr>")
            walk(c.id, depth + 1, seen)

    walk(None, 0, set())
    return ("<table class='stitch-versions'><thead><tr><th></th><th>candidate</th><th>iter</th>"
            "<th>origin</th><th>parent</th><th>status</th>"
            "<th style='white-space:nowrap'>vs eager</th><th>what</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>" + _marks_note(vs.values()))


def verdict_html(v: Verdict) -> str:
    """The Verifier's verdict: status, trials, errors, tolerances, timings and speedups."""
    color = "#1a7f37" if v.status == "pass" else "#cf222e"
    rest = v.summary()[len(v.status):].lstrip("; ")
    head = (f"<div class='stitch-verdict'><b style='color:{color};font-size:1.1em'>"
            f"{html.escape(v.status)}</b> {html.escape(rest)}"
            f" <small>(candidate <code>{html.escape(v.candidate_id)}</code> on "
            f"{html.escape(v.device)})</small></div>")
    sp = []
    for label, val in (("vs eager", v.speedup_vs_eager),
                       ("vs torch.compile", v.speedup_vs_compile)):
        sp.append(f"<td>{label}</td><td><b>{val:.2f}x</b></td>" if val is not None
                  else f"<td>{label}</td><td>not measured</td>")
    speed = "<table><tr>" + "</tr><tr>".join(sp) + "</tr></table>"
    tol = ""
    if v.atol is not None or v.max_abs_err is not None:
        # the reason above names the atol the comparison used, this line the one asked for
        scaled = ", atol as asked: scaled to the output's size above" \
            if SCALED_ATOL in (v.reason or "") else ""
        tol = (f"<div>max abs err {_num(v.max_abs_err)}, max rel err {_num(v.max_rel_err)} "
               f"(atol {_num(v.atol)}, rtol {_num(v.rtol)}{scaled})</div>")
    trials = "".join(
        f"<tr><td>{t.seed}</td><td>{'✔' if t.ok else '✘'}</td><td>{_num(t.max_abs_err)}</td>"
        f"<td>{_num(t.max_rel_err)}</td><td>{t.mismatches}</td><td>{note}</td></tr>"
        for t, note in zip(v.trials, trial_notes(v.trials)))
    trials = ("<table class='stitch-trials'><thead><tr><th>seed</th><th>ok</th><th>max abs</th>"
              "<th>max rel</th><th>mismatches</th><th>note</th></tr></thead>"
              f"<tbody>{trials}</tbody></table>") if trials else ""
    timings = "".join(f"<tr><td>{html.escape(k)}</td><td>{val:.4f} ms</td></tr>"
                      for k, val in v.shown_timings())
    timings = f"<table class='stitch-timings'>{timings}</table>" if timings else ""
    flags = (f"<div style='color:#9a6700'>flags: {html.escape(', '.join(v.flags))}</div>"
             if v.flags else "")
    flags += "".join(f"<div style='color:#9a6700'>{html.escape(n)}</div>"
                     for n in flag_notes(v.flags))
    return head + flags + speed + tol + trials + timings


def flag_notes(flags: list[str]) -> list[str]:
    """What a person should make of a verdict's flags, where a name is not enough."""
    notes = []
    for f in flags:
        m = re.match(r"baselines_retimed:eager ([\d.e+-]+)->([\d.e+-]+) ms", f)
        if m:
            notes.append(f"The host's load changed: eager took {m.group(2)} ms at this "
                         f"verification's start against {m.group(1)} ms before, so the "
                         "baselines were timed again for it. Speedups of verdicts from "
                         "before were measured under the other load; verify again to compare.")
        elif (m := re.match(r"host_load_changed:eager ([\d.e+-]+)->([\d.e+-]+) ms", f)):
            notes.append(f"The host's load changed while this was timed: eager took "
                         f"{m.group(2)} ms right after the candidate against {m.group(1)} ms "
                         "in the baseline its speedup divides, so that ratio compares two "
                         "loads. It is ranked below verdicts timed under a steady load; "
                         "verify again to compare.")
        elif f == "speedup_over_10x":
            notes.append("Over 10x faster than eager: worth reading the code and the "
                         "profile before trusting it.")
    return notes


NOTE_SHOWN = 120   # characters of a trial's note shown before "more"
WHAT_SHOWN = 80    # characters of a candidate's notes shown as what it tried, in the history


def trial_notes(trials: list) -> list[str]:
    """Each trial's note as markup: a note already shown on an earlier row is named by that
    row's seed, not repeated (a mismatch is usually the same on every trial), and a long one
    opens from its first words."""
    first: dict[str, Any] = {}
    out = []
    for t in trials:
        msg = t.message or ""
        if msg and msg in first:
            out.append(f"<i>as seed {html.escape(str(first[msg]))}</i>")
            continue
        first.setdefault(msg, t.seed)
        if len(msg) > NOTE_SHOWN:
            out.append(f"<details><summary>{html.escape(msg[:NOTE_SHOWN].rstrip())}…</summary>"
                       f"{html.escape(msg)}</details>")
        else:
            out.append(html.escape(msg))
    return out


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2e}"


def _plain(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup or "")).split())


def _focus_line(text: str, k: Any, diags: list[dict], parent: str | None = None) -> int:
    """Where the editor opens: the first error, else the first line that differs from the
    parent's code (an edit just verified: the view stayed where the entry was, and the edit
    sat below it, out of sight), else the entry function (after the helpers)."""
    errors = [d["line"] for d in diags if d["severity"] == "error"]
    if errors:
        return max(1, min(errors) - 3)
    lines = text.splitlines()
    if parent is not None and parent != text:
        old = parent.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(lines, old), 1) if a != b),
                     min(len(lines), len(old)) + 1)
        return max(1, first - 3)
    for name in k.entry or [k.name]:
        pat = re.compile(rf"\b{re.escape(name)}\s*\(")
        for i, ln in enumerate(lines, 1):
            if pat.search(ln) and not ln.lstrip().startswith(("//", "/*", "*")):
                return max(1, i - 2)
    return 0


def _diagnostics_html(items: list[dict]) -> str:
    rows = "".join(
        f"<li><code>line {d['line']}{':' + str(d['col']) if d.get('col') else ''}</code> "
        f"<b>{html.escape(d['severity'])}</b>: {html.escape(d['message'])}</li>"
        for d in items)
    return f"<ul class='stitch-diagnostics' style='margin:2px 0;color:#82071e'>{rows}</ul>"


def _diff_html(old: str | None, new: str, name: str, old_id: str | None, new_id: str) -> str:
    if old is None:
        return "<small><i>no previous version of this kernel to compare with</i></small>"
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(),
                                      f"{name} @ {old_id}", f"{name} @ {new_id}", lineterm=""))
    if not lines:
        return f"<small><i>unchanged since {html.escape(old_id or '')}</i></small>"
    out = []
    for ln in lines:
        color = ("#1a7f37" if ln.startswith("+") else "#cf222e" if ln.startswith("-")
                 else "#6e7781" if ln.startswith("@@") else "inherit")
        out.append(f"<span style='color:{color}'>{html.escape(ln)}</span>")
    return ("<details open><summary>diff against the previous version</summary>"
            f"<pre class='stitch-diff' style='font-family:{_MONO};font-size:11px'>"
            + "\n".join(out) + "</pre></details>")


_CODE_CSS = (f"<style>.stitch-code textarea{{font-family:{_MONO}!important;font-size:12px;"
             "white-space:pre;tab-size:4}.stitch-params .cm-editor{max-height:90px}"
             ".stitch-draft{background:#ddf4ff;border:1px solid #54aeff;padding:4px 8px;"
             "border-radius:4px;margin:4px 0}.stitch-next{margin:2px 0 4px 0}"
             ".stitch-summary{margin:2px 0}"
             # plain CSS indicators: an emoji glyph is an empty box where no emoji font is
             ".stitch-spinner{display:inline-block;width:.75em;height:.75em;margin-right:.45em;"
             "vertical-align:-.1em;border:2px solid #54aeff;border-right-color:transparent;"
             "border-radius:50%;animation:stitch-spin .8s linear infinite}"
             "@keyframes stitch-spin{to{transform:rotate(360deg)}}"
             ".stitch-paused{display:inline-block;width:.2em;height:.7em;margin-right:.45em;"
             "border-left:.2em solid #57606a;border-right:.2em solid #57606a}</style>")
_PANEL_CSS = ("<style>.stitch-panel table{border-collapse:collapse;margin:4px 0}"
              ".stitch-panel td,.stitch-panel th{padding:1px 10px 1px 0;text-align:left;"
              "line-height:1.4}.stitch-panel th{border-bottom:1px solid #d0d7de}"
              # numbers never break inside ("2.37e-" on one line, "04" on the next)
              ".stitch-trials td:nth-child(-n+5){white-space:nowrap}"
              # a panel whose kernel restarted: ipywidgets marks every view of it
              # disconnected; its buttons would still look live and do nothing when clicked
              ".stitch-panel.jupyter-widgets-disconnected button{opacity:.4;"
              "pointer-events:none}"
              ".stitch-panel.jupyter-widgets-disconnected::after{content:'This panel lost its "
              "kernel (restarted or shut down): it shows the session as it was and its buttons "
              "do nothing. %stitch_open reopens the session where it stopped.';display:block;"
              "order:-1;margin:2px 0 6px 0;padding:4px 8px;border-radius:4px;"
              "background:#fff8c5;border:1px solid #d4a72c;color:#4d2d00}</style>")


def _show(out: W.Output, fig: Any) -> None:
    """Replace an Output widget's content with a plotly figure (safe from a background thread).

    The figure goes out as plotly's own mimetype, which JupyterLab renders with the
    jupyterlab-plotly extension without loading anything from the network."""
    out.outputs = ({"output_type": "display_data", "metadata": {},
                    "data": figures.mimebundle(fig)},)


RETIMED_NOTE = ("† eager was timed again in this job: the host's load had moved by over 30% "
                "since the baselines were timed, so this ratio is against eager as it ran then, "
                "and compares loosely with the others")


LOAD_NOTE = ("‡ the host's load moved while this candidate was timed (eager, timed again "
             "right after its calls, had changed by over 30%): the ratio compares two loads, so "
             "it ranks below every verdict timed under a steady load, however large it is")


def _retimed_mark(v: Verdict) -> str:
    """A dagger (with the why on hover) on a speedup whose baselines were timed again, a
    double dagger on one timed while the host's load moved (ranked below the steady ones)."""
    marks = ""
    if baselines_retimed(v.flags):
        marks += f"<span title='{html.escape(RETIMED_NOTE)}'>†</span>"
    if load_changed(v.flags):
        marks += f"<span title='{html.escape(LOAD_NOTE)}'>‡</span>"
    return marks


def _marks_note(vs: Any) -> str:
    """The daggers the table shows, said in words under it (a hover is easy to miss)."""
    flags = [v.flags for v in vs if v.status == "pass"]
    notes = []
    if any(baselines_retimed(fl) for fl in flags):
        notes.append(RETIMED_NOTE)
    if any(load_changed(fl) for fl in flags):
        notes.append(LOAD_NOTE)
    return "".join(f"<div><small>{html.escape(n)}.</small></div>" for n in notes)


def _kept_reason(session: Any) -> str | None:
    """Why the reference is kept (``Session.kept_parts``), what the candidates did first and
    then the ops left to PyTorch, said as such: one line that began with an op read as if
    that op were the reason. None when a candidate beats eager."""
    try:
        parts = session.kept_parts()
    except Exception:  # noqa: BLE001 - a view never fails on a half-made session
        return None
    if parts is None:
        return None
    blockers, outcome = parts
    text = "; ".join(outcome) or "no candidate beat eager"
    return text + (". Left to PyTorch: " + "; ".join(blockers) if blockers else "")


def _best(session: Any) -> tuple[Candidate, Verdict] | None:
    try:
        return session.best()
    except Exception:  # noqa: BLE001 - a view never fails on a half-made session
        return None


def _install_progress(session: Any, callback: Callable[..., None]) -> Callable[[], None]:
    """Point the Session's ``on_progress`` at the panel for one step; returns the undo."""
    old = getattr(session, "on_progress", None)
    try:
        session.on_progress = callback
    except AttributeError:
        return lambda: None

    def undo() -> None:
        session.on_progress = old
    return undo
