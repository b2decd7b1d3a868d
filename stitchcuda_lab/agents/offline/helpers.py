"""Tiny helpers the offline compiler's stages share; a leaf that imports nothing of the package.

>>> contiguous_strides([2, 3, 4]), ceildiv(10, 4), round_up(10, 4), node_ref({"node": "x"})
([12, 4, 1], 3, 12, 'x')
"""

from __future__ import annotations

from typing import Any


def contiguous_strides(shape: list[int]) -> list[int]:
    """Element strides of a dense row-major tensor of ``shape``."""
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return st[::-1]


def ceildiv(a: int, b: int) -> int:
    """``a / b`` rounded up."""
    return -(-a // b)


def round_up(n: int, m: int) -> int:
    """``n`` rounded up to a multiple of ``m``."""
    return ceildiv(n, m) * m


def node_ref(x: Any) -> str | None:
    """The node name of a graph argument ``{"node": name}``; None for anything else."""
    return x["node"] if isinstance(x, dict) and set(x) == {"node"} else None


DROPOUTS = ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")


def dropout_of_zero(args: list, kwargs: dict) -> bool:
    """Whether a dropout's p (by keyword, else second) is 0: ATen returns the input before
    drawing anything, in training too (``native_dropout`` is not one of these: it draws)."""
    p = kwargs["p"] if "p" in kwargs else (args[1] if len(args) > 1 else 0.5)
    return p == 0
