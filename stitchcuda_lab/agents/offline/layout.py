"""Kernels that read and write channels-last tensors where they lie, with no copy to NCHW.

A convolution run channels-last (the channel fastest in memory: the layout cuDNN's and
oneDNN's fast kernels use, and torch.compile's) hands its output to the fused kernels after
it. A kernel reads each operand through its own strides over the kernel's dims
(``ir.Operand.strides``), so reading channels-last memory needs only that operand's strides;
to read it in memory order (coalesced on a GPU, in cache lines on a CPU) the kernel's dims are
permuted as well, the channel dim innermost (N, C, H, W -> N, H, W, C). Per-channel operands (a
bias, a norm's weight) then vary along that innermost dim, operands in NCHW keep their own
strides, and the full-size outputs are written channels-last too, so the next kernel or
convolution reads them as they are (``program._kernel_call`` allocates them so, and converts
an input the prediction got wrong: ``contiguous(memory_format=...)`` is free where it is
already so).

>>> spec = build_spec(graph, ["sub", "tanh"], "k0", nhwc={"convolution"})   # doctest: +SKIP
>>> spec.dims                                          # N, H, W, C          # doctest: +SKIP
[32, 512, 512, 64]
"""

from __future__ import annotations

import re

from .helpers import contiguous_strides
from .ir import KernelSpec

FORMATS = {4: "channels_last", 5: "channels_last_3d"}   # by rank: torch's memory formats
PERMUTATION = {4: [0, 2, 3, 1], 5: [0, 2, 3, 4, 1]}     # kernel dims, channel innermost
MANY_ROWS = 1 << 20   # rows of a reduction not over the channels that a thread each keeps busy


def channels_last_strides(shape: list[int]) -> list[int]:
    """Element strides of a dense channels-last tensor of ``shape`` (N, C, spatial...).

    >>> channels_last_strides([2, 3, 4, 5])
    [60, 1, 15, 3]
    """
    strides = [0] * len(shape)
    strides[1] = 1
    step = shape[1]
    for d in reversed(range(2, len(shape))):
        strides[d] = step
        step *= shape[d]
    strides[0] = step
    return strides


def split_view_strides(src: list[int], view: list[int]) -> list[int] | None:
    """Element strides of ``view`` (a shape) taken of a dense channels-last tensor of shape
    ``src`` where the view only splits its spatial dims (the batch and the channels kept whole,
    as a pool lifted to ``[N, C, OH, kh, OW, kw]``, ``rewrite._pool_epilogue``); None for any
    other view (one that merges dims, or splits the channels).

    >>> split_view_strides([2, 3, 4, 6], [2, 3, 2, 2, 3, 2])
    [72, 1, 36, 18, 6, 3]
    """
    if len(src) not in FORMATS or len(view) <= len(src) or view[:2] != src[:2]:
        return None
    outer = channels_last_strides(src)
    strides: list[int] = []
    j = 0
    for d, size in enumerate(src):
        run: list[int] = []
        prod = 1
        while j < len(view) and (prod < size or (not run and size == 1)):
            run.append(view[j])
            prod *= view[j]
            j += 1
        if prod != size or (d < 2 and len(run) != 1):
            return None
        step = outer[d]
        inner = []
        for part in reversed(run):   # the innermost part of a split dim keeps its stride
            inner.append(step if part != 1 else 0)
            step *= part
        strides += reversed(inner)
    return strides if j == len(view) else None


def to_channels_last(spec: KernelSpec, nhwc: set[str] | frozenset[str],
                     split_rows: bool = False,
                     views: dict[str, list[int]] | None = None) -> bool:
    """Make a lowered spec (before ``passes.finish``) read the full-size operands in ``nhwc``
    and write its full-size outputs channels-last, its dims permuted channel-innermost; True
    when done. Left as it is (False) where no full-size input is in ``nhwc``, where a row kernel
    does not reduce over the channels, where an expression indexes an operand with strides of
    its own (a gather), or where the kernel's meaning depends on the order of its dims: a scan,
    an index result over several dims (an argmax over one dim, ``torch.min(x, dim=1)``'s
    indices, is the position along it in either order), a convolution's window, a group
    norm's channel split (lowered elsewhere: not passed here). A max or average pool keeps its
    dims and walks its outputs channel innermost instead (``_pool_channels_last``)."""
    rank = len(spec.dims)
    if rank in PERMUTATION and spec.kind == "pool":
        return _pool_channels_last(spec, nhwc)
    # a split view's rank is past the tensor's own (4 or 5): a 5-d view of a 4-d tensor
    # would take the 5-d permutation below and read the view as NCHW
    views = {n: st for n, st in (views or {}).items()
             if len(st) == rank and rank not in PERMUTATION}
    if spec.kind not in ("pointwise", "rowwise") or (
            rank not in PERMUTATION and not any(o.node in views for o in spec.operands)):
        return False
    # a row kernel reads its rows along the innermost dim with a block or a warp per row; with
    # the channel innermost and not reduced (a norm over H and W) the rows interleave: a
    # thread a row, neighbouring threads on neighbouring channels (coalesced), where the rows
    # are many (a mean over the depth); few, they are split among a block's warps
    # (``split_rows``: the CUDA backend's ``split`` strategy). Without it they keep NCHW (a
    # copy in, a block per row): a C kernel walks each row on one core, strided
    if spec.kind == "rowwise" and not spec.reduce[1] and spec.rows < MANY_ROWS \
            and not split_rows:
        return False
    if any(s.op == "scan" or ("idx" in s.outs and sum(spec.reduce) != 1) for s in spec.stmts):
        return False
    # an expression indexing an operand itself (a gather: ``in0[b_in0 + t * 30LL]``) has the
    # strides it was lowered with written into it: it would read other elements
    if any(s.op == "expr" and re.search(rf"\b{o.name}\[", s.expr)
           for s in spec.stmts for o in spec.operands):
        return False
    full = [o for o in spec.operands if _dense(o, spec.dims)]
    if not any(o.role != "out" and (o.node in nhwc or o.node in views) for o in full):
        return False
    if rank not in PERMUTATION:   # a view splitting a channels-last tensor's spatial dims
        return _split_view_channels_last(spec, full, views)
    # a row's result kept with its dims (``mean(dim=2, keepdim=True)``) is written
    # channels-last too, so that a reduction over its channels after it reads it in place
    kept = [d if not r else 1 for d, r in zip(spec.dims, spec.reduce)]
    full += [o for o in spec.operands if o.role == "out" and o.shape == kept != spec.dims
             and kept[1] != 1 and all(st == d or size == 1 for st, d, size in
                                      zip(o.strides, contiguous_strides(kept), kept))]
    for o in full:
        if o.role == "out" or o.node in nhwc:
            o.strides = [st if size != 1 else 0
                         for st, size in zip(channels_last_strides(o.shape), o.shape)]
            o.layout = FORMATS[rank]
    perm = PERMUTATION[rank]
    spec.dims = [spec.dims[p] for p in perm]
    spec.reduce = [spec.reduce[p] for p in perm]
    for o in spec.operands:
        o.strides = [o.strides[p] for p in perm]
    return True


def _dense(o, shape: list[int]) -> bool:
    """``o`` of ``shape``, laid out contiguously (NCHW) where its size is more than one."""
    return o.shape == shape and all(st == d or size == 1 for st, d, size in
                                    zip(o.strides, contiguous_strides(shape), shape))


def _pool_channels_last(spec: KernelSpec, nhwc: set[str] | frozenset[str]) -> bool:
    """A max or average pool (not a convolution's window) whose input is channels-last: the
    window's full-size operands read where they lie, the outputs written channels-last, and
    the outputs walked channel innermost (``ir.KernelSpec.channels_inner``), so that a warp
    reads 32 neighbouring channels of each tap of its windows (128 bytes) and writes them
    side by side. The pool's window math is the same; only the order of the outputs and the
    operands' strides change."""
    s = next((t for t in spec.stmts if t.op == "pool"), None)
    if s is None or s.window.get("kind") == "conv" or len(spec.dims) - s.window["nd"] != 2:
        return False
    if any(t.op == "expr" and re.search(rf"\b{o.name}\[", t.expr)
           for t in spec.stmts for o in spec.operands):
        return False   # a gather: strides written into the expression
    win = {t.operand for t in spec.stmts if t.op == "load" and t.level == "win"}
    in_shape = list(spec.dims[:2]) + list(s.window["in"])
    laid = [o for i, o in enumerate(spec.operands) if o.role != "out" and o.node in nhwc
            and _dense(o, in_shape if i in win else spec.dims)]
    if not any(spec.operands.index(o) in win for o in laid):
        return False
    laid += [o for o in spec.operands if o.role == "out" and _dense(o, spec.dims)]
    rank = len(spec.dims)
    for o in laid:
        o.strides = [st if size != 1 else 0
                     for st, size in zip(channels_last_strides(o.shape), o.shape)]
        o.layout = FORMATS[rank]
    spec.channels_inner = True
    return True


def _split_view_channels_last(spec: KernelSpec, full: list, views: dict[str, list[int]]) -> bool:
    """A kernel over a view that splits a channels-last tensor's spatial dims (a pool lifted
    to ``[N, C, OH, kh, OW, kw]`` and reduced over kh and kw): the view read where it lies
    (``views``: its strides), the outputs of the unsplit rank written channels-last, and the
    kernel's dims permuted channel innermost, so neighbouring rows (a thread each: a pool's
    windows are many and short) are neighbouring channels. Other operands keep their own
    strides."""
    rank = len(spec.dims)
    for o in full:
        if o.role != "out" and o.node in views:
            o.strides = [st if size != 1 else 0 for st, size in zip(views[o.node], o.shape)]
            o.layout = "split"
    for o in spec.operands:
        if o.role != "out" or len(o.shape) not in FORMATS:
            continue
        own = contiguous_strides(o.shape)
        # the output's dims of size > 1 are the kernel's dims with a stride, in order
        moved = dict(zip([st for st, d in zip(own, o.shape) if d > 1],
                         [st for st, d in zip(channels_last_strides(o.shape), o.shape) if d > 1]))
        if sorted(st for st in o.strides if st) != sorted(moved) or not moved:
            continue   # not a dense NCHW tensor of its own: left as it is
        o.strides = [moved[st] if st else 0 for st in o.strides]
        o.layout = FORMATS[len(o.shape)]
    perm = [0] + list(range(2, rank)) + [1]
    spec.dims = [spec.dims[p] for p in perm]
    spec.reduce = [spec.reduce[p] for p in perm]
    for o in spec.operands:
        o.strides = [o.strides[p] for p in perm]
    return True
