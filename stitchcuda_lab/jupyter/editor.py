"""The code editor of the panel: CodeMirror 6 as an anywidget, or a plain textarea.

``CodeEditor`` loads ``static/editor.js`` (built from ``widgets/`` by esbuild and shipped in the
wheel: nothing is fetched at run time): line numbers, C/CUDA or JSON highlighting, compiler
messages marked on their lines, no spellcheck, the diff against the parent version inline.
Where anywidget is not installed, or ``kind="textarea"`` is asked for, ``make_editor`` returns
an ipywidgets ``Textarea`` with the same ``value`` trait; the front-end module itself falls
back to a textarea when CodeMirror cannot start.

>>> ed = make_editor("int two(void) { return 2; }", lang="c", kind="textarea")
>>> ed.value
'int two(void) { return 2; }'
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

import ipywidgets as W

STATIC = Path(__file__).resolve().parent / "static"
BUNDLE = STATIC / "editor.js"
KINDS = ("auto", "codemirror", "textarea")


def available() -> bool:
    """True when the CodeMirror editor can be used (anywidget installed, bundle shipped)."""
    return find_spec("anywidget") is not None and BUNDLE.is_file()


def _editor_class() -> type:
    import anywidget
    import traitlets as T

    class CodeEditor(anywidget.AnyWidget):
        """CodeMirror 6 over one text (see module docstring)."""

        _esm = BUNDLE
        value = T.Unicode("").tag(sync=True)
        lang = T.Unicode("c").tag(sync=True)
        original = T.Unicode("").tag(sync=True)
        show_diff = T.Bool(False).tag(sync=True)
        diagnostics = T.List(T.Dict()).tag(sync=True)
        read_only = T.Bool(False).tag(sync=True)
        height = T.Unicode("420px").tag(sync=True)
        focus_line = T.Int(0).tag(sync=True)

    return CodeEditor


_CLASS: list[type] = []


def code_editor_class() -> type:
    """The anywidget class (made once; importing anywidget is deferred until needed)."""
    if not _CLASS:
        _CLASS.append(_editor_class())
    return _CLASS[0]


def make_editor(code: str, *, lang: str = "c", original: str | None = None,
                diagnostics: list[dict] | None = None, read_only: bool = False,
                height: str = "420px", focus_line: int = 0, kind: str = "auto") -> W.DOMWidget:
    """An editor over ``code``: CodeMirror when it can be had (``kind`` auto or codemirror),
    else a textarea. Both have ``value``; the CodeMirror one also ``diagnostics`` (dicts with
    1-based ``line``/``col``, ``severity``, ``message``), ``original``, ``show_diff`` and
    ``focus_line`` (scrolled to the top when drawn). ``height`` is the most it grows to."""
    if kind not in KINDS:
        from ..errors import UsageError
        raise UsageError(f"editor {kind!r} is not an editor kind",
                         hint=f"use one of: {', '.join(KINDS)}")
    if kind != "textarea" and available():
        cls = code_editor_class()
        ed = cls(value=code, lang=lang, original=original or "",
                 show_diff=bool(original) and original != code,
                 diagnostics=list(diagnostics or []), read_only=read_only, height=height,
                 focus_line=focus_line)
        ed.add_class("stitch-code")
        return ed
    if kind == "codemirror":
        from ..errors import UsageError
        raise UsageError("the CodeMirror editor needs anywidget",
                         hint="pip install 'stitchcuda-lab[notebook]' (it brings anywidget)")
    ed = W.Textarea(value=code, disabled=read_only,
                    layout=W.Layout(width="100%", height="auto" if height == "auto" else "260px"))
    ed.add_class("stitch-code")
    return ed


def is_codemirror(widget: Any) -> bool:
    return bool(_CLASS) and isinstance(widget, _CLASS[0])
