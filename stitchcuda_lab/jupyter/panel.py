"""The session panel: an ipywidgets view over one Session (tabs Plan, Kernels, Profile, History).

The panel holds no loop state of its own: ``refresh()`` redraws it from the Session, and every
button posts an event to the Session (through ``bridge``) and then lets the Session advance until
it needs a person again. Long steps run in a background thread so the notebook stays responsive;
progress comes from the Session's ``on_progress`` callback, errors land in the panel's error box.

>>> panel = SessionPanel(session)        # doctest: +SKIP
>>> panel                                # shows the tabs in a notebook
>>> panel.plan_approve.click()           # the same as clicking "Approve plan"
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import json
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..errors import StitchError
from ..candidate import Candidate
from ..plan import Plan, Task
from ..verdict import Verdict
from . import bridge, figures

_MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
_TAB_TITLES = ("Plan", "Kernels", "Profile", "History")


class SessionPanel:
    """A view over ``session``. ``threaded=False`` runs steps inline (tests, scripts)."""

    def __init__(self, session: Any, *, threaded: bool = True, export_dir: str | None = None):
        self.session = session
        self.threaded = threaded
        self.model: Any = None                     # the finished model, once loaded
        self.exported: Path | None = None
        self.figures: dict[str, Any] = {}          # name -> plotly Figure shown last
        self._thread: threading.Thread | None = None
        self._busy = False
        self.last_exception: BaseException | None = None   # the last step's error, if any
        self._lock = threading.Lock()
        self._task_rows: list[_TaskRow] = []
        self._editors: dict[str, W.Textarea] = {}
        self._selected: str | None = None          # candidate id shown in Kernels/Profile
        self._follow_latest = True

        # header: title, phase, progress, error box
        self.title = W.HTML()
        self._css = W.HTML(_PANEL_CSS + _CODE_CSS, layout=W.Layout(display="none"))
        self.status = W.HTML()
        self.progress = W.IntProgress(value=0, min=0, max=100, description="",
                                      layout=W.Layout(width="220px", visibility="hidden"))
        self.progress_label = W.Label("")
        self.error_box = W.HTML("", layout=W.Layout(display="none"))
        header = W.VBox([self._css, self.title,
                         W.HBox([self.status, self.progress, self.progress_label]),
                         self.error_box])

        # Plan tab
        self.plan_rows = W.VBox()
        self.plan_notes = W.HTML()
        self.plan_approve = W.Button(description="Approve plan", button_style="success",
                                     icon="check",
                                     tooltip="Approve the checked tasks in this order")
        self.plan_approve.on_click(lambda _: self.approve_plan())
        plan_tab = W.VBox([self.plan_notes, self.plan_rows, self.plan_approve])

        # Kernels tab
        self.version = W.Dropdown(description="version", layout=W.Layout(width="420px"))
        self.version.observe(self._on_version, names="value")
        self.kernel_box = W.VBox()
        self.kernel_approve = W.Button(description="Approve", button_style="success", icon="check",
                                       tooltip="Accept this candidate as the result")
        self.kernel_verify = W.Button(description="Verify edit", button_style="primary",
                                      icon="play", tooltip="Verify the edited kernels")
        self.kernel_regen = W.Button(description="Regenerate", icon="refresh",
                                     tooltip="Ask the Coder for new candidates")
        self.kernel_approve.on_click(lambda _: self.approve_candidate())
        self.kernel_verify.on_click(lambda _: self.verify_edit())
        self.kernel_regen.on_click(lambda _: self.regenerate())
        kernels_tab = W.VBox([self.version, self.kernel_box,
                              W.HBox([self.kernel_approve, self.kernel_verify, self.kernel_regen])])

        # Profile tab
        self.verdict_html = W.HTML()
        self.timeline_out = W.Output()
        self.kernels_out = W.Output()
        self.ncu_out = W.Output()
        self.ncu_note = W.HTML()
        profile_tab = W.VBox([self.verdict_html, self.timeline_out, self.kernels_out,
                              self.ncu_note, self.ncu_out])

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
        self._buttons = [self.plan_approve, self.kernel_approve, self.kernel_verify,
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
        best = _best(s)
        if best:
            lines.append(f"best: {best[0]}")
            lines.append(f"  {best[1]}")
        if self.error:
            lines.append(self.error)
        return "\n".join(lines)

    def html(self) -> str:
        s = self.session
        head = (f"<b>stitch session {html.escape(str(getattr(s, 'id', '?')))}</b>: "
                f"{html.escape(bridge.phase(s) or 'new')}")
        parts = [head]
        p = bridge.plan(s)
        if p is not None:
            parts.append(p._repr_html_())
        best = _best(s)
        if best:
            parts.append(f"<div>best: {html.escape(str(best[0]))}</div>{best[1]._repr_html_()}")
        parts.append(self.error_box.value)
        return "<div class='stitch-session'>" + "".join(parts) + "</div>"

    # ---- refresh --------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraw every tab from the Session."""
        with self._lock:
            s = self.session
            ph = bridge.phase(s)
            sid = html.escape(str(getattr(s, "id", "")))
            name = html.escape(getattr(getattr(s, "problem", None), "name", "") or "")
            self.title.value = f"<b>stitch</b> session <code>{sid}</code> · {name}"
            self.status.value = f"phase: <b>{html.escape(ph or 'new')}</b>&nbsp;&nbsp;"
            err = bridge.error(s)
            if err and not self.error_box.value:
                self._show_error(str(err))
            self._refresh_plan()
            self._refresh_kernels()
            self._refresh_profile()
            self._refresh_history()
            self._update_buttons()

    def _update_buttons(self) -> None:
        busy, s = self.busy, self.session
        ph = bridge.phase(s)
        done = bridge.is_done(s)
        sel = self.selected()
        self.plan_approve.disabled = busy or ph != "planned"
        self.kernel_approve.disabled = busy or sel is None or sel.id not in bridge.pending(s)
        self.kernel_verify.disabled = busy or sel is None or done or not sel.kernels
        self.kernel_regen.disabled = busy or ph not in ("coded", "verified")
        self.next_button.disabled = busy or ph not in ("coded", "verified")
        self.stop_button.disabled = busy
        self.model_button.disabled = busy or _best(s) is None

    # Plan tab
    def _refresh_plan(self) -> None:
        p = bridge.plan(self.session)
        if p is None:
            self.plan_notes.value = "<i>No plan yet: the Planner runs on the first advance.</i>"
            self.plan_rows.children = ()
            self._task_rows = []
            return
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in p.notes)
        state = "approved" if p.approved else "waiting for your approval"
        self.plan_notes.value = (f"<b>Plan</b> by the {html.escape(p.agent)} planner for "
                                 f"<code>{html.escape(p.device)}</code> — {state}"
                                 + (f"<ul>{notes}</ul>" if notes else ""))
        self._task_rows = [_TaskRow(t, self._move, editable=not p.approved) for t in p.tasks]
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
        cs = bridge.candidates(self.session)
        vs = bridge.verdicts(self.session)
        options = []
        for c in cs:
            v = vs.get(c.id)
            label = (f"{c.id} · iter {c.iteration} · {c.origin} · "
                     f"{v.status if v else 'not verified'}")
            options.append((label, c.id))
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

    def selected(self) -> Candidate | None:
        for c in bridge.candidates(self.session):
            if c.id == self._selected:
                return c
        return None

    def _draw_candidate(self) -> None:
        c = self.selected()
        self._editors = {}
        if c is None:
            self.kernel_box.children = (W.HTML("<i>No candidate yet: approve the plan first.</i>"),)
            return
        prev = bridge.previous(self.session, c)
        prev_code = {k.name: k.code for k in prev.kernels} if prev else {}
        v = bridge.verdict_for(self.session, c)
        items: list[W.Widget] = [W.HTML(f"<b>{html.escape(str(c))}</b>"
                                        + (f"<div>{html.escape(c.notes)}</div>"
                                           if c.notes else ""))]
        for k in c.kernels:
            ed = W.Textarea(value=k.code, layout=W.Layout(width="100%", height="260px"))
            ed.add_class("stitch-code")
            self._editors[k.name] = ed
            diff = _diff_html(prev_code.get(k.name), k.code, k.name,
                              prev.id if prev else None, c.id)
            items += [W.HTML(f"<b>{html.escape(k.name)}</b> <small>({html.escape(k.lang)}; "
                             f"entry {html.escape(', '.join(k.entry) or '-')})</small>"),
                      ed, W.HTML(diff)]
        if not c.kernels:
            items.append(W.HTML("<i>This candidate has no kernels of its own.</i>"))
        log = (v.build_log if v else "") or ""
        items.append(W.HTML(
            "<details><summary>compile log</summary>"
            f"<pre style='font-family:{_MONO};font-size:11px;max-height:240px;overflow:auto'>"
            f"{html.escape(log) or '(empty)'}</pre></details>"))
        self.kernel_box.children = items

    def edit_kernel(self, name: str, code: str) -> None:
        """Put ``code`` in kernel ``name``'s editor (what typing in it does); then verify_edit()."""
        if name not in self._editors:
            raise StitchError(f"the shown candidate has no kernel {name!r}",
                              hint=f"kernels: {', '.join(self._editors) or '(none)'}")
        self._editors[name].value = code

    def edited_kernels(self) -> dict[str, str]:
        """Kernels whose editor text differs from the selected candidate's code."""
        c = self.selected()
        if c is None:
            return {}
        code = {k.name: k.code for k in c.kernels}
        return {n: ed.value for n, ed in self._editors.items() if ed.value != code.get(n)}

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
            self.ncu_note.value = ""
            self.figures = {k: f for k, f in self.figures.items() if k == "history"}
            return
        self.verdict_html.value = note + verdict_html(v)
        prof = v.profile or {}
        self.figures["timeline"] = figures.timeline_figure(
            prof, title=f"Timeline · reference vs {v.candidate_id}")
        self.figures["kernels"] = figures.kernel_figure(prof)
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
        vs = bridge.verdicts(self.session)
        best = _best(self.session)
        rows = []
        for c in bridge.candidates(self.session):
            v = vs.get(c.id)
            star = "★" if best and best[0].id == c.id else ""
            sp = (f"{v.speedup_vs_eager:.2f}x" if v and v.speedup_vs_eager is not None else "-")
            rows.append(f"<tr><td>{star}</td><td><code>{html.escape(c.id)}</code></td>"
                        f"<td>{c.iteration}</td><td>{html.escape(c.origin)}</td>"
                        f"<td>{html.escape(c.parent or '-')}</td>"
                        f"<td>{html.escape(v.status if v else 'not verified')}</td>"
                        f"<td>{sp}</td></tr>")
        self.versions_html.value = (
            "<table class='stitch-versions'><thead><tr><th></th><th>candidate</th><th>iter</th>"
            "<th>origin</th><th>parent</th><th>status</th><th>vs eager</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>" if rows else "<i>No versions yet.</i>")

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
        c = self.selected()
        if c is not None:
            self._run("Approving", lambda: bridge.approve_candidate(self.session, c))

    def verify_edit(self) -> None:
        c = self.selected()
        edits = self.edited_kernels()
        if c is None:
            return
        if not edits:
            self._show_error("No kernel was edited: change a kernel's code, then Verify edit.")
            return

        def go() -> None:
            edited = c
            for name, code in edits.items():
                edited = dataclasses.replace(edited.with_kernel(name, code), parent=c.id)
            self._follow_latest = True
            bridge.post_edited(self.session, edited)
        self._run("Verifying your edit", go)

    def regenerate(self) -> None:
        self._run("Regenerating", lambda: bridge.regenerate(self.session))

    def next_iteration(self) -> None:
        self._run("Running the next iteration", lambda: bridge.next_iteration(self.session))

    def stop_and_export(self) -> None:
        target = self.export_path.value.strip() or str(Path(self.session.dir) / "export")

        def go() -> None:
            if not bridge.is_done(self.session):
                bridge.stop(self.session)
            self.exported = Path(self.session.export(target))
            self.export_html.value = (f"Exported to <code>{html.escape(str(self.exported))}</code>"
                                      "; <code>session.model()</code> loads the best candidate.")
        self._run("Stopping and exporting", go, advance=False)

    def load_model(self) -> None:
        def go() -> None:
            self.model = self.session.model()
            self.export_html.value = ("Loaded: <code>panel.model</code> is the best candidate "
                                      f"as a module ({html.escape(type(self.model).__name__)}).")
        self._run("Loading the finished model", go, advance=False)

    def advance(self) -> None:
        """Let the Session run until it needs a person (in the background)."""
        self._run("Working", lambda: None)

    def _run(self, label: str, action: Callable[[], Any], *, advance: bool = True) -> None:
        """Do ``action`` (post an event), then let the Session advance, in the background
        unless ``threaded`` is off. Errors go to the error box; ``last_exception`` keeps the
        last one so a caller running inline can re-raise it."""
        self.last_exception = None
        if self.busy:
            self._show_error("A step is still running; wait for it to finish.")
            return
        self._busy = True
        self._clear_error()
        self._set_progress(label, 0)
        for b in self._buttons:
            b.disabled = True
        hook = _install_progress(self.session, self._on_progress)

        def work() -> None:
            try:
                action()
                if advance and not bridge.is_done(self.session):
                    self.session.advance()
            except StitchError as e:
                self.last_exception = e
                self._show_error(e.message, e.hint)
            except Exception as e:  # noqa: BLE001 - every failure must reach the person
                self.last_exception = e
                self._show_error(f"{type(e).__name__}: {e}", detail=traceback.format_exc())
            finally:
                hook()
                self._busy = False
                self._set_progress("", None)
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

    # ---- progress and errors --------------------------------------------------------------

    def _on_progress(self, *args: Any, **kw: Any) -> None:
        """Accepts ``(message)``, ``(message, fraction)`` or ``(message, done, total)``."""
        msg = kw.get("message") or next((a for a in args if isinstance(a, str)), "")
        nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        frac = kw.get("fraction")
        if frac is None and "done" in kw and kw.get("total"):
            frac = kw["done"] / kw["total"]
        if frac is None and len(nums) >= 2 and nums[1]:
            frac = nums[0] / nums[1]
        elif frac is None and len(nums) == 1:
            frac = nums[0]
        self._set_progress(msg, frac)

    def _set_progress(self, message: str, fraction: float | None) -> None:
        self.progress_label.value = message
        if fraction is None and not message:
            self.progress.layout.visibility = "hidden"
            self.progress.value = 0
            return
        self.progress.layout.visibility = "visible"
        if fraction is not None:
            self.progress.value = int(max(0.0, min(1.0, float(fraction))) * 100)
            self.progress.bar_style = "info"

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

    @property
    def error(self) -> str:
        """The error box's text ('' when there is none)."""
        import re
        return html.unescape(re.sub(r"<[^>]+>", " ", self.error_box.value)).strip()


class _TaskRow:
    """One Task in the Plan tab: approve checkbox, ops, share, technique/params edits, order."""

    def __init__(self, task: Task, move: Callable[[_TaskRow, int], None], *, editable: bool):
        self.task = task
        self.index = 0
        self.locked = not editable
        keep = task.kind == "keep"
        self.approve = W.Checkbox(value=task.status != "skipped", indent=False,
                                  description="", layout=W.Layout(width="28px"),
                                  disabled=not editable or keep)
        self.technique = W.Text(value=task.technique, placeholder="technique",
                                layout=W.Layout(flex="1 1 auto", min_width="320px"),
                                disabled=not editable)
        self.params = W.Text(value=json.dumps(task.params) if task.params else "",
                             placeholder='params, e.g. {"block": 256}',
                             layout=W.Layout(width="220px"), disabled=not editable)
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
            W.HBox([W.HTML("&nbsp;" * 6), self.technique, self.params, self.up, self.down],
                   layout=W.Layout(width="100%")),
        ], layout=W.Layout(border="1px solid #d0d7de", padding="4px", margin="2px 0"))

    def edited(self) -> Task:
        params = self.task.params
        raw = self.params.value.strip()
        if raw:
            try:
                params = json.loads(raw)
            except json.JSONDecodeError as e:
                from ..errors import PlanError
                raise PlanError(f"task {self.task.id}: params are not valid JSON ({e.msg})",
                                hint='write them like {"block": 256, "vec": 4}') from None
            if not isinstance(params, dict):
                from ..errors import PlanError
                raise PlanError(f"task {self.task.id}: params must be a JSON object",
                                hint='write them like {"block": 256}')
        elif raw == "":
            params = {}
        status = self.task.status
        if self.task.kind != "keep":
            status = "approved" if self.approve.value else "skipped"
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
        tol = (f"<div>max abs err {_num(v.max_abs_err)}, max rel err {_num(v.max_rel_err)} "
               f"(atol {_num(v.atol)}, rtol {_num(v.rtol)})</div>")
    trials = "".join(
        f"<tr><td>{t.seed}</td><td>{'✔' if t.ok else '✘'}</td><td>{_num(t.max_abs_err)}</td>"
        f"<td>{_num(t.max_rel_err)}</td><td>{t.mismatches}</td><td>{html.escape(t.message)}</td></tr>"
        for t in v.trials)
    trials = ("<table class='stitch-trials'><thead><tr><th>seed</th><th>ok</th><th>max abs</th>"
              "<th>max rel</th><th>mismatches</th><th>note</th></tr></thead>"
              f"<tbody>{trials}</tbody></table>") if trials else ""
    timings = "".join(f"<tr><td>{html.escape(k)}</td><td>{val:.4f} ms</td></tr>"
                      for k, val in sorted(v.timings.items()))
    timings = f"<table class='stitch-timings'>{timings}</table>" if timings else ""
    flags = (f"<div style='color:#9a6700'>flags: {html.escape(', '.join(v.flags))}</div>"
             if v.flags else "")
    return head + flags + speed + tol + trials + timings


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2e}"


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
             "white-space:pre;tab-size:4}</style>")
_PANEL_CSS = ("<style>.stitch-panel table{border-collapse:collapse;margin:4px 0}"
              ".stitch-panel td,.stitch-panel th{padding:1px 10px 1px 0;text-align:left;"
              "line-height:1.4}.stitch-panel th{border-bottom:1px solid #d0d7de}</style>")


def _show(out: W.Output, fig: Any) -> None:
    """Replace an Output widget's content with a plotly figure (safe from a background thread).

    The figure goes out as plotly's own mimetype, which JupyterLab renders with the
    jupyterlab-plotly extension without loading anything from the network."""
    out.outputs = ({"output_type": "display_data", "metadata": {},
                    "data": figures.mimebundle(fig)},)


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
