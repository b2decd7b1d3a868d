"""The notebook surface: ``%%stitch`` magics, the session panel (ipywidgets) and plotly figures.

Nothing else in the package imports this subpackage; it may import everything.

>>> from stitchcuda_lab.jupyter import SessionPanel       # doctest: +SKIP
>>> SessionPanel(session)                                 # the panel over a Session
"""

from __future__ import annotations

from typing import Any

__all__ = ["SessionPanel", "StitchMagics", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str) -> Any:
    if name == "SessionPanel":
        from .panel import SessionPanel
        return SessionPanel
    if name == "StitchMagics":
        from .magics import StitchMagics
        return StitchMagics
    raise AttributeError(f"module 'stitchcuda_lab.jupyter' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    from .magics import load_ipython_extension as _load
    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as _unload
    _unload(ipython)
