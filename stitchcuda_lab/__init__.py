"""stitchcuda-lab: turn a PyTorch model into a faster GPU program, step by step.

Importing the package is instant and needs neither IPython nor a GPU; the heavy parts load
on first use.

>>> import stitchcuda_lab as sl
>>> sl.Settings().agent
'offline'
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Settings": "stitchcuda_lab.settings",
    "Plan": "stitchcuda_lab.plan",
    "Task": "stitchcuda_lab.plan",
    "Candidate": "stitchcuda_lab.candidate",
    "KernelSource": "stitchcuda_lab.candidate",
    "Verdict": "stitchcuda_lab.verdict",
    "Problem": "stitchcuda_lab.problem",
    "load_problem": "stitchcuda_lab.problem",
    "problem_from_source": "stitchcuda_lab.problem",
    "problem_from_objects": "stitchcuda_lab.problem",
    "analyse": "stitchcuda_lab.graph",
    "Session": "stitchcuda_lab.session",
    "StitchError": "stitchcuda_lab.errors",
}

__all__ = sorted([*_LAZY, "load_ipython_extension", "__version__"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'stitchcuda_lab' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext stitchcuda_lab``: registers the %%stitch magics."""
    from .jupyter.magics import load_ipython_extension as _load
    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .jupyter.magics import unload_ipython_extension as _unload
    _unload(ipython)
