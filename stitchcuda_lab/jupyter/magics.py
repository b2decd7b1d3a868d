"""``%%stitch`` and friends: the notebook's way into a Session.

The magics are a thin layer: they parse options, turn the cell into a Problem, hand it to a
Session and show the panel. They never wait for a click: ``%%stitch`` advances the Session until
it needs a person, shows the panel and returns; the panel's buttons carry on. User mistakes raise
IPython's ``UsageError`` (shown without a traceback).

    %load_ext stitchcuda_lab
    %config StitchMagics.iters = 2            # any Settings field
    %%stitch --device auto --agent offline -o s --panel p
    class Model(nn.Module): ...
    def get_inputs(): ...

``-o NAME`` keeps the Session in ``NAME`` (the ``%timeit -o`` convention), ``--panel NAME`` the
panel; the panel's messages then name those variables. After a kernel restart,
``%stitch_open -o s`` reopens the newest session where it stopped.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from traitlets import Bool, Float, Int, Unicode

from ..errors import ProblemError, StitchError
from ..errors import UsageError as StitchUsageError
from ..settings import AGENTS, Settings
from ..quiet import quiet_profiler

DEVICES = ("auto", "cpu", "cuda")
_TRAITS = {"bool": Bool, "int": Int, "float": Float, "str": Unicode}


def _trait(f: dataclasses.Field) -> Any:
    """The ``%config`` trait of one Settings field; None (unset) keeps STITCH_* or the default."""
    kind = str(f.type).split(" ")[0]                    # "float | None" -> "float"
    return _TRAITS[kind](None, allow_none=True, help=Settings.describe(f.name)).tag(config=True)


# One configurable trait per Settings field, made from the fields (declared once, there).
if TYPE_CHECKING:
    _SettingTraits = Magics     # the traits are made at run time: the checker sees Magics
else:
    _SettingTraits = type(Magics)("_SettingTraits", (Magics,),
                                  {f.name: _trait(f) for f in dataclasses.fields(Settings)})


@magics_class
class StitchMagics(_SettingTraits):
    """The %%stitch magics. Configurable: ``%config StitchMagics.<setting> = value`` for every
    Settings field, and ``editor``."""

    editor = Unicode("auto", help="kernel editor: auto (CodeMirror when anywidget is there), "
                     "codemirror, textarea").tag(config=True)

    def __init__(self, shell: Any = None, **kw: Any):
        super().__init__(shell, **kw)
        self.sessions: dict[str, Any] = {}     # id -> Session opened in this kernel
        self.panels: dict[str, Any] = {}       # id -> the last SessionPanel shown for it
        self.last: str | None = None

    # ---- settings -------------------------------------------------------------------------

    def settings(self, **overrides: Any):
        """Settings from STITCH_* variables, then ``%config`` values, then ``overrides``."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(Settings)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return Settings.from_env(**values)
        except StitchError as e:
            raise UsageError(str(e)) from None

    # ---- %%stitch -------------------------------------------------------------------------

    @magic_arguments()
    @argument("--device", default=None,
              help="where candidates run: auto (cuda when available), cpu, cuda or cuda:N")
    @argument("--agent", default=None, choices=AGENTS,
              help="who plans and codes: offline (default, no network), claude, openai, hybrid")
    @argument("--iters", type=int, default=None, help="refine iterations after the first")
    @argument("--auto", action="store_true", help="run the whole loop without stopping")
    @argument("-o", "--output", dest="output", default=None,
              help="store the Session in this variable (like %%timeit -o)")
    @argument("--panel", dest="panel_var", default=None,
              help="store the session panel in this variable")
    @argument("--model-class", dest="model_class", default=None,
              help="name of the nn.Module class in the cell when it is not called Model")
    @argument("--name", default=None, help="the problem's name (default: cell)")
    @cell_magic
    def stitch(self, line: str, cell: str) -> Any:
        """Optimise the model defined in this cell (KernelBench contract: ``Model``,
        ``get_inputs``, ``get_init_inputs``) with a Planner -> Coder -> Verifier Session.

        Without ``--auto`` it stops at the plan and shows the panel; the panel's buttons carry
        on. ``-o NAME`` keeps the Session in ``NAME``: ``NAME.model()``, ``NAME.export(dir)``.
        """
        args = self._parse(self.stitch, line)
        if args.device is not None:
            _check_device(args.device)
        for var in (args.output, args.panel_var):
            if var is not None and not var.isidentifier():
                raise UsageError(f"%%stitch: {var!r} is not a Python variable name")
        settings = self.settings(device=args.device, agent=args.agent, iters=args.iters)
        source = _cell_source(cell, args.model_class)
        session = self._create(source, args.name or "cell", settings)   # graph.py keeps it quiet
        if self.shell is not None:
            # like %%cython, the cell's names become usable in the notebook too
            self.shell.ex(cell)
            if args.output:
                self.shell.user_ns[args.output] = session
        return self._show(session, auto=args.auto,
                          names={"session": args.output, "panel": args.panel_var})

    def _create(self, source: str, name: str, settings: Any) -> Any:
        from ..problem import problem_from_source
        from ..session import Session
        try:
            problem = problem_from_source(source, name=name, origin="<cell>")
            # validated here, in the kernel: a cell's objects live in this process
            session = Session.create(problem, settings)
        except ProblemError as e:
            raise UsageError(_cell_lines(e)) from None
        except StitchUsageError as e:
            raise UsageError(str(e)) from None
        self._register(session)
        return session

    def _register(self, session: Any) -> None:
        self.sessions[str(session.id)] = session
        self.last = str(session.id)

    def _show(self, session: Any, *, auto: bool = False, advance: bool = True,
              names: dict[str, str | None] | None = None) -> None:
        """Display the panel, advance the session in place (progress shows live), return.

        A user mistake found on the way (a missing API key, a bad setting) raises UsageError
        as well as showing in the panel; with ``--auto`` any error fails the cell, since no one
        may be watching the panel (papermill, CI)."""
        from .panel import SessionPanel
        given = {k: v for k, v in (names or {}).items() if v}
        panel = SessionPanel(session, threaded=False, names=given, editor=self.editor)
        self.panels[str(session.id)] = panel
        if self.shell is not None and given.get("panel"):
            self.shell.user_ns[given["panel"]] = panel
        handle = display(panel, display_id=True)
        if advance and not _finished(session):
            with quiet_profiler():
                if auto:
                    panel._run("Running the whole loop", lambda: session.advance(auto=True),
                               advance=False)
                else:
                    panel._run("Planning", lambda: None)
            if handle is not None:
                handle.update(panel)   # the text/HTML snapshot papermill keeps shows the result
        elif not advance:   # opened: the bar says where the session stood, not an empty line
            panel.progress.layout.visibility = "visible"
            panel._finish_progress("Opened where it stopped", True)
            if _finished(session):
                panel.progress_label.value = "Opened: the session has finished"
        panel.threaded = True
        err = panel.last_exception
        if isinstance(err, StitchUsageError):
            raise UsageError(str(err)) from None
        if err is not None and auto:
            raise err

    # ---- line magics ----------------------------------------------------------------------

    @line_magic
    def stitch_sessions(self, line: str = "") -> Any:
        """List sessions under the sessions root (also ones a crash interrupted)."""
        from ..store import SessionStore
        root = line.strip() or self.settings().sessions_dir
        try:
            rows = SessionStore(root).list()
        except StitchError as e:
            raise UsageError(str(e)) from None
        return SessionList(rows, root)

    @magic_arguments()
    @argument("id", nargs="?", default=None,
              help="session id or folder (default: the newest under the sessions root)")
    @argument("-o", "--output", dest="output", default=None,
              help="store the Session in this variable")
    @argument("--panel", dest="panel_var", default=None,
              help="store the session panel in this variable")
    @line_magic
    def stitch_open(self, line: str) -> Any:
        """Open a session (also one a crash or a kernel restart interrupted) where it stopped,
        and show its panel."""
        args = self._parse(self.stitch_open, line)
        sid = args.id or self._newest()
        session = self.sessions.get(sid) or self._open(sid)
        self._register(session)
        if self.shell is not None and args.output:
            self.shell.user_ns[args.output] = session
        return self._show(session, advance=False,
                          names={"session": args.output, "panel": args.panel_var})

    def _newest(self) -> str:
        from ..store import SessionStore
        root = self.settings().sessions_dir
        try:
            rows = SessionStore(root).list()
        except StitchError as e:
            raise UsageError(str(e)) from None
        rows = [r for r in rows if r.get("status") != "unreadable"]
        if not rows:
            raise UsageError(f"no stitch sessions under {root}: run a %%stitch cell first "
                             "(or %config StitchMagics.sessions_dir = '<folder>')")
        return str(rows[0]["id"])

    @magic_arguments()
    @argument("id", nargs="?", default=None, help="session id (default: the last one)")
    @line_magic
    def stitch_approve(self, line: str) -> Any:
        """Approve what the session waits for (the plan, or the pending candidates), then
        advance it until it needs a person again."""
        from . import bridge
        args = self._parse(self.stitch_approve, line)
        session = self._get(args.id)
        panel = self.panels.get(str(session.id))
        if panel is not None and panel.busy:
            panel.wait()                 # a click is being worked on: approve after it
        try:
            ph = bridge.phase(session)
            waiting = [c for c in bridge.candidates(session) if c.id in bridge.pending(session)]
            if ph == "planned":
                bridge.approve_plan(session)
            elif waiting:
                bridge.approve_pending(session)
            else:
                raise UsageError(f"session {session.id} is {ph!r}: nothing awaits approval"
                                 + ("; run the next iteration from the panel" if ph == "verified"
                                    else ""))
            session.advance()
        except StitchUsageError as e:
            raise UsageError(str(e)) from None
        self._refresh(session)
        print(session.state)

    @magic_arguments()
    @argument("id", help="session id")
    @argument("dir", help="folder to write the standalone ModelNew and sources to")
    @line_magic
    def stitch_export(self, line: str) -> Any:
        """Export the best candidate as a standalone KernelBench-style ModelNew file."""
        args = self._parse(self.stitch_export, line)
        session = self._get(args.id)
        try:
            return Path(session.export(args.dir))
        except StitchUsageError as e:
            raise UsageError(str(e)) from None

    @magic_arguments()
    @argument("id", nargs="?", default=None, help="session id (default: the last one)")
    @line_magic
    def stitch_stop(self, line: str) -> Any:
        """Stop a session; its best candidate so far stays available for export."""
        from . import bridge
        args = self._parse(self.stitch_stop, line)
        session = self._get(args.id)
        try:
            bridge.stop(session)
        except StitchUsageError as e:
            raise UsageError(str(e)) from None
        self._refresh(session)
        print(session.state)

    @magic_arguments()
    @argument("id", nargs="?", default=None, help="session id (default: the last one)")
    @line_magic
    def stitch_close(self, line: str) -> Any:
        """Give a session up in this kernel (what a kernel restart does): its lock is released,
        its panels stop posting, its folder stays; ``%stitch_open ID`` carries it on later."""
        args = self._parse(self.stitch_close, line)
        sid = args.id or self.last
        if sid is None or sid not in self.sessions:
            raise UsageError(f"no open stitch session {sid or ''} in this kernel"
                             + (f"; open ones: {', '.join(self.sessions)}" if self.sessions
                                else ""))
        session = self.sessions.pop(sid)
        panel = self.panels.pop(sid, None)
        if panel is not None:
            panel.wait()
            panel.detach(f"closed in this kernel: %stitch_open {sid} reopens it")
        session.close()
        if self.last == sid:
            self.last = next(reversed(self.sessions), None)
        print(f"closed session {sid}; %stitch_open {sid} reopens it where it stopped")

    # ---- helpers --------------------------------------------------------------------------

    def _parse(self, fn: Any, line: str) -> Any:
        try:
            return parse_argstring(fn, line)
        except UsageError as e:
            name = getattr(fn, "__name__", "stitch")
            sign = "%%" if name == "stitch" else "%"   # the cell magic
            parser = getattr(fn, "parser", None)
            opts = sorted({o for a in getattr(parser, "_actions", []) for o in a.option_strings
                           if o.startswith("--") and o != "--help"})
            raise UsageError(f"{sign}{name}: {e}" + (f" (options: {', '.join(opts)}; "
                                                      f"{sign}{name}? describes them)"
                                                      if opts else "")) from None

    def _get(self, session_id: str | None) -> Any:
        sid = session_id or self.last
        if sid is None:
            raise UsageError("no stitch session yet: run a %%stitch cell or %stitch_open ID")
        if sid in self.sessions:
            return self.sessions[sid]
        return self._open(sid)

    def _open(self, session_id: str) -> Any:
        from ..session import Session
        try:
            session = Session.open(session_id, self.settings())
        except StitchError as e:   # unknown id, or a folder another process holds
            raise UsageError(str(e)) from None
        self._register(session)
        return session

    def _refresh(self, session: Any) -> None:
        panel = self.panels.get(str(session.id))
        if panel is not None:
            panel.session = session
            panel.refresh()


def _cell_lines(e: ProblemError) -> str:
    """``e``'s message with its line counted as the cell counts it: the ``%%stitch`` line is
    the cell's first, and not part of the problem's source."""
    text = str(e)
    if e.line and e.source_name == "<cell>":
        text = text.replace(f"<cell>:{e.line}: ", f"<cell>:{e.line + 1}: ", 1).replace(
            f"line {e.line} reads:", f"line {e.line + 1} reads:", 1)
    return text


class SessionList:
    """What %stitch_sessions returns: renders as text and as an HTML table."""

    def __init__(self, rows: list[Any], root: str):
        self.rows = [r if isinstance(r, dict) else _row_dict(r) for r in rows]
        self.root = root

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    _COLS = ("id", "problem", "status", "device", "agent", "created", "events", "last_event")

    def __repr__(self) -> str:
        if not self.rows:
            return f"no sessions under {self.root}"
        lines = [f"{len(self.rows)} session(s) under {self.root}"]
        for r in self.rows:
            lines.append("  " + "  ".join(f"{r.get(c, '')}" for c in self._COLS if c in r))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html
        if not self.rows:
            return f"<i>no sessions under {html.escape(self.root)}</i>"
        cols = [c for c in self._COLS if any(c in r for r in self.rows)]
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols)
                       + "</tr>" for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _row_dict(r: Any) -> dict[str, Any]:
    if hasattr(r, "to_dict"):
        return r.to_dict()
    return dict(vars(r))


def _finished(session: Any) -> bool:
    from . import bridge
    return bridge.is_done(session)


def _check_device(device: str) -> None:
    if device in DEVICES or (device.startswith("cuda:") and device[5:].isdigit()):
        return
    raise UsageError(f"--device {device!r} is not a device: use auto, cpu, cuda or cuda:N")


def _cell_source(cell: str, model_class: str | None) -> str:
    """The cell as a problem module; checks it defines the class the magic is asked to use."""
    if not cell.strip():
        raise UsageError("%%stitch needs a cell that defines `class Model(nn.Module)` and "
                         "`get_inputs()`")
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return cell  # problem_from_source reports it with its line
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for n in tree.body:
        if isinstance(n, ast.Assign):
            defined |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in n.names}
    if model_class:
        if not model_class.isidentifier():
            raise UsageError(f"--model-class {model_class!r} is not a Python name")
        if model_class not in defined:
            classes = sorted(n.name for n in tree.body if isinstance(n, ast.ClassDef))
            raise UsageError(f"--model-class {model_class}: the cell defines no such class"
                             + (f" (it defines {', '.join(classes)})" if classes else ""))
        if model_class != "Model":
            cell = cell.rstrip() + f"\n\nModel = {model_class}  # %%stitch --model-class\n"
    elif "Model" not in defined:
        classes = sorted(n.name for n in tree.body if isinstance(n, ast.ClassDef))
        hint = (f"; name yours with --model-class {classes[0]}" if classes else "")
        raise UsageError("the cell defines no `Model` class: %%stitch needs "
                         "`class Model(nn.Module)` and `get_inputs()`" + hint)
    if "get_inputs" not in defined:
        raise UsageError("the cell defines no `get_inputs()`: return a list of example inputs, "
                         "e.g. `def get_inputs(): return [torch.randn(64, 128)]`")
    return cell


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (``%load_ext stitchcuda_lab``); ``%config StitchMagics`` finds them."""
    magics = StitchMagics(ipython)
    ipython.register_magics(magics)
    if magics not in ipython.configurables:
        ipython.configurables.append(magics)


def unload_ipython_extension(ipython: Any) -> None:
    magics = ipython.magics_manager.registry.get("StitchMagics")
    if magics is None:
        return
    for kind in ("line", "cell"):
        for name in list(ipython.magics_manager.magics[kind]):
            fn = ipython.magics_manager.magics[kind][name]
            if getattr(fn, "__self__", None) is magics:
                del ipython.magics_manager.magics[kind][name]
    del ipython.magics_manager.registry["StitchMagics"]
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)


__all__ = ["StitchMagics", "load_ipython_extension", "unload_ipython_extension"]
