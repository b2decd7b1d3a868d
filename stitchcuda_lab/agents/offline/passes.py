"""Passes that finish a lowered KernelSpec: kernel dims, pass numbers, dead statements.

``finish(spec, split)`` runs them in order: ``split_groups`` (group norm's channel dim becomes
groups x channels per group), ``coalesce_dims`` (size-1 dims dropped, neighbours every operand
walks contiguously merged), ``assign_passes`` (which pass over the row computes each
reduction and writes each output) and ``prune`` (statements nothing stored needs, and
indices of a max or min that nothing reads).
"""

from __future__ import annotations

from .ir import KernelSpec


def finish(spec: KernelSpec, split: tuple[int, int] | None) -> KernelSpec:
    """``spec`` with its dims split and coalesced, passes assigned and dead code pruned."""
    if split is not None:
        split_groups(spec, *split)
    if spec.kind != "pool":   # a pool's window operands are strided over its input's dims
        coalesce_dims(spec)
    assign_passes(spec)
    prune(spec)
    return spec


def split_groups(spec: KernelSpec, d: int, groups: int) -> None:
    """Dim ``d`` (C channels) becomes [groups, C // groups], the second one reduced."""
    C = spec.dims[d]
    spec.dims = spec.dims[:d] + [groups, C // groups] + spec.dims[d + 1:]
    spec.reduce = spec.reduce[:d] + [False, True] + spec.reduce[d + 1:]
    for o in spec.operands:
        st = o.strides
        o.strides = st[:d] + [st[d] * (C // groups), st[d]] + st[d + 1:]


def coalesce_dims(spec: KernelSpec) -> None:
    """``coalesce`` over the spec's operands; a row kernel's operands learn whether they
    vary only over row dims."""
    dims, red, strides = coalesce(spec.dims, spec.reduce, [list(o.strides) for o in spec.operands])
    spec.dims, spec.reduce = dims, red
    for o, st in zip(spec.operands, strides):
        o.strides = st
        if spec.kind == "rowwise":
            o.row = all(s == 0 for s, r in zip(st, red) if r)


def coalesce(dims: list[int], red: list[bool], strides: list[list[int]]):
    """Drop size-1 dims and merge neighbours that every operand walks contiguously."""
    keep = [i for i, d in enumerate(dims) if d != 1]
    dims = [dims[i] for i in keep]
    red = [red[i] for i in keep]
    strides = [[st[i] for i in keep] for st in strides]
    i = len(dims) - 2
    while i >= 0:
        if red[i] == red[i + 1] and all(st[i] == st[i + 1] * dims[i + 1] for st in strides):
            dims[i:i + 2] = [dims[i] * dims[i + 1]]
            red[i:i + 2] = [red[i]]
            for st in strides:
                st[i:i + 2] = [st[i + 1]]
        i -= 1
    if not dims:
        dims, red, strides = [1], [False], [[0] for _ in strides]
    return dims, red, strides


def assign_passes(spec: KernelSpec) -> None:
    """Pass numbers: a reduction runs in the pass after the row values it needs; full outputs
    are written in the last pass."""
    avail: dict[str, int] = {}
    for s in spec.stmts:
        if s.op == "load":
            avail[s.var] = 0
        elif s.op == "expr":
            avail[s.var] = max((avail.get(d, 0) for d in s.deps), default=0)
        elif s.op == "reduce":
            p = 1 + _row_avail(spec, s.deps[0])
            s.passno = p
            for v in s.outs.values():
                avail[v] = p
    last = max((s.passno for s in spec.stmts if s.op == "reduce"), default=0)
    spec.npasses = last + (1 if any(s.op == "store" and s.level == "full" for s in spec.stmts)
                           or last == 0 else 0)
    for s in spec.stmts:
        if s.op == "store":
            s.passno = spec.npasses if s.level == "full" else avail.get(s.var, 0)


def _row_avail(spec: KernelSpec, var: str) -> int:
    """Latest pass whose row results ``var`` (a full value) depends on."""
    best = 0
    stack, seen = [var], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        st = spec.stmt_of(v)
        if st.op == "reduce":
            best = max(best, st.passno)
            continue
        if st.op == "expr":
            stack.extend(st.deps)
    return best


def prune(spec: KernelSpec) -> None:
    """Drop statements nothing stored depends on."""
    need = {s.var for s in spec.stmts if s.op == "store"}
    changed = True
    while changed:
        changed = False
        for s in spec.stmts:
            produced = [s.var] if s.var else list(s.outs.values())
            if any(p in need for p in produced):
                for d in s.deps:
                    if d not in need:
                        need.add(d)
                        changed = True
    spec.stmts = [s for s in spec.stmts if s.op == "store" or any(
        p in need for p in ([s.var] if s.var else list(s.outs.values())))]
    # max/min along a dim whose indices nothing reads (``torch.max(x, 1)[0]``): the plain
    # reduction, one compare and no index to carry per element
    for s in spec.stmts:
        if s.op == "reduce" and s.kind in ("argmax", "argmin") and s.outs["idx"] not in need:
            s.kind, s.outs = s.kind[3:], {"r": s.outs["val"]}
