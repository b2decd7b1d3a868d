"""Where and how a candidate's output differs from the reference: the feedback a fix needs.

A count and the largest error say that a kernel is wrong; the indices say which part of it is:
a tail after the last full vector (a missing remainder loop), one row in every block (an
indexing error), every element scaled by the same factor (a formula), NaN where numbers belong
(outputs never written). ``describe`` looks along every dimension, shows the first positions
with the values, and names the pattern when there is one. Runs where the tensors are, copying
only a few numbers per dimension to the host.

>>> import torch
>>> ref = torch.ones(4, 8); out = ref.clone(); out[:, 6:] = 0
>>> for part in describe(out, ref, (out - ref).abs() > 1e-4).split("; "): print(part)
along dim 1 (size 8): indices 6-7 only (the last 2)
first at [0, 6]: got 0, expected 1
[0, 7]: got 0, expected 1
[1, 6]: got 0, expected 1
how: zeros where the reference has numbers
"""

from __future__ import annotations

import math
from typing import Any

MAX_RANGES = 4      # index ranges listed per dimension
MAX_POINTS = 3      # first mismatching positions shown


def describe(out: Any, ref: Any, bad: Any) -> str:
    """One line: which indices along each dimension mismatch, the first few, and the pattern."""
    import torch
    n_bad = int(bad.sum())
    if n_bad == 0 or out.shape != ref.shape:
        return ""
    parts = []
    shape = list(ref.shape) or [1]
    b = bad.reshape(shape)
    if len(shape) > 1 or n_bad < b.numel():
        for d, size in enumerate(shape):
            if size <= 1:
                continue
            others = [i for i in range(len(shape)) if i != d]
            hit = b.any(dim=others) if others else b
            idx = torch.nonzero(hit).flatten().tolist()
            if len(idx) < size:
                parts.append(f"along dim {d} (size {size}): {_indices(idx, size)}")
    if not parts:
        parts.append("every element" if n_bad == b.numel() else
                     f"scattered: {n_bad} of {b.numel()}, no index of any dimension is spared")
    points = torch.nonzero(b)[:MAX_POINTS].tolist()
    o, r = out.reshape(shape), ref.reshape(shape)
    shown = [f"[{', '.join(map(str, p))}]: got {_num(o[tuple(p)])}, expected {_num(r[tuple(p)])}"
             for p in points]
    parts.append("first at " + "; ".join(shown))
    how = _pattern(o, r, b)
    if how:
        parts.append(f"how: {how}")
    return "; ".join(parts)


def _indices(idx: list[int], size: int) -> str:
    ranges: list[tuple[int, int]] = []
    for i in idx:
        if ranges and i == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], i)
        else:
            ranges.append((i, i))
    text = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in ranges[:MAX_RANGES])
    if len(ranges) > MAX_RANGES:
        text += f", ... ({len(idx)} of {size})"
    note = ""
    if len(ranges) == 1 and ranges[0][1] == size - 1 and ranges[0][0] > 0:
        note = f" (the last {size - ranges[0][0]})"
    elif len(ranges) == 1 and ranges[0][0] == 0:
        note = f" (the first {ranges[0][1] + 1})"
    elif len(idx) >= 3:
        step = idx[1] - idx[0]
        if step > 1 and all(b - a == step for a, b in zip(idx, idx[1:])):
            note = f" (stride {step} from {idx[0]})"
    return f"indices {text} only{note}"


def _pattern(o: Any, r: Any, b: Any) -> str:
    """The shape of the error among the mismatching elements, when it has one."""
    import torch
    got, want = o[b].double(), r[b].double()
    if bool(torch.isnan(got).all()) and not bool(torch.isnan(want).any()):
        return "NaN where the reference has numbers (outputs not written?)"
    if bool((~torch.isfinite(got)).any()) and bool(torch.isfinite(want).all()):
        return "inf or NaN in some outputs (overflow or a division by zero?)"
    if bool((got == 0).all()) and bool((want != 0).any()):
        return "zeros where the reference has numbers"
    nz = want.abs() > 1e-12
    if int(nz.sum()) >= 2:
        ratio = got[nz] / want[nz]
        mean = float(ratio.mean())
        if math.isfinite(mean) and float((ratio - mean).abs().max()) <= 1e-3 * max(abs(mean), 1):
            if abs(mean + 1) < 1e-3:
                return "the sign is flipped"
            return f"every mismatching value is {mean:.4g}x the reference (a constant factor)"
    diff = got - want
    if got.numel() >= 2:
        mean = float(diff.mean())
        if float((diff - mean).abs().max()) <= 1e-6 + 1e-3 * abs(mean):
            return f"every mismatching value is off by {mean:+.4g} (a constant offset)"
    if o.dim() >= 1 and o.shape[-1] > 1:
        shifted = torch.isclose(o[..., :-1], r[..., 1:], rtol=1e-4, atol=1e-5)
        bb = b[..., :-1]
        if int(bb.sum()) and bool(shifted[bb].all()):
            return "each value is its right neighbour's (an index off by one)"
    return ""


def _num(x: Any) -> str:
    v = float(x)
    return f"{v:.6g}" if math.isfinite(v) else str(v)
