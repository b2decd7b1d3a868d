"""Backend-neutral code generation: what the C and the CUDA backend print alike.

Index math (``offset``, ``row_bases``, ``elem_index``), the loads and expressions of one
element (``elem_lines``), the row values printed between passes (``RowValues``), the passes of a
row kernel (``row_passes``) and one record per reduction kind (``REDUCTIONS``: accumulator
state, identity, combiner, C's start value and OpenMP operator) with its element update
(``update``) and its four-element update (``group_update``). A backend supplies its types,
loads and stores, and the loops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .ir import KernelSpec, Operand, Stmt

Load = Callable[[Operand, str, str], str]      # (operand, index, acc type) -> value
Store = Callable[[Operand, str, str], str]     # (operand, index, value) -> statement
Index = Callable[[Operand], str]               # operand -> element index expression


def offset(strides: list[int], dims: list[int], idx: str, which: list[int],
           sfx: str = "LL") -> str:
    """Element offset of flat index ``idx`` over the dims in ``which`` (mixed radix);
    ``sfx`` is the literal suffix ("U" for 32-bit index math)."""
    # dims that lie one inside the other in this operand (a stride that is the next dim's
    # stride times its size, or both 0) are one dim of their product: (j / 16) * 16 + j % 16
    # is j, and a C compiler vectorises a loop over j, not over the gather that spells it
    merged: list[list[int]] = []   # [size, stride]
    for d in which:
        if merged and merged[-1][1] == strides[d] * dims[d]:
            merged[-1] = [merged[-1][0] * dims[d], strides[d]]
        else:
            merged.append([dims[d], strides[d]])
    terms = []
    sub = [m[0] for m in merged]
    for k, (_, st) in enumerate(merged):
        if st == 0:
            continue
        inner = math.prod(sub[k + 1:])
        q = idx if inner == 1 else f"({idx} / {inner}{sfx})"
        if k > 0:
            q = f"({q} % {sub[k]}{sfx})"
        terms.append(q if st == 1 else f"{q} * {st}{sfx}")
    return " + ".join(terms) if terms else "0"


def row_dims(spec: KernelSpec) -> tuple[list[int], list[int]]:
    """(dims that index rows, dims reduced within a row)."""
    return ([d for d in range(len(spec.dims)) if not spec.reduce[d]],
            [d for d in range(len(spec.dims)) if spec.reduce[d]])


def row_bases(spec: KernelSpec, ind: str) -> list[str]:
    """``b_<operand>``: each operand's offset of row ``r``."""
    rdims, _ = row_dims(spec)
    return [f"{ind}const long long b_{o.name} = {offset(o.strides, spec.dims, 'r', rdims)};"
            for o in spec.operands]


def row_index(o: Operand) -> str:
    """Index of a per-row value: the row's base."""
    return f"b_{o.name}"


def elem_index(spec: KernelSpec, j: str) -> Index:
    """Index of element ``j`` of the current row, per operand."""
    _, edims = row_dims(spec)

    def at(o: Operand) -> str:
        off = offset(o.strides, spec.dims, j, edims)
        return f"b_{o.name}" + ("" if off == "0" else f" + {off}")
    return at


def rename(expr: str, local: set[str], suffix: str) -> str:
    """``expr`` with the variables in ``local`` renamed ``v3`` -> ``v3<suffix>``."""
    if not suffix:
        return expr
    return re.sub(r"\bv\d+\b", lambda m: m.group(0) + suffix if m.group(0) in local else m.group(0),
                  expr)


def elem_lines(spec: KernelSpec, stmts: list[Stmt], load: Load, idx_of: Index,
               suffix: str = "", vec: dict | None = None, ind: str = "") -> list[str]:
    """Declarations for the loads and expressions ``stmts`` of one element, their variables
    renamed with ``suffix``; ``vec[operand]`` replaces that operand's load (a float4 lane)."""
    local = {s.var for s in stmts}
    vec = vec or {}
    out = []
    for s in stmts:
        name = s.var + suffix
        if s.op == "load":
            o = spec.operands[s.operand]
            src = vec.get(s.operand) or load(o, idx_of(o), spec.acc)
            out.append(f"{ind}const {spec.acc} {name} = {src};")
        else:
            out.append(f"{ind}const {s.ctype or spec.acc} {name} = "
                       f"{rename(s.expr, local, suffix)};")
    return out


class RowValues:
    """The per-row loads and expressions of a row kernel, printed as soon as every row value
    they read exists (``avail``), and the per-row outputs, stored once computed."""

    def __init__(self, spec: KernelSpec, load: Load, store: Store) -> None:
        self.spec, self._load, self._store = spec, load, store
        self.avail: set[str] = set()
        self._stmts = [s for s in spec.stmts if s.level == "row" and s.op in ("load", "expr")]
        self._done: set[str] = set()
        self._stored: set[int] = set()

    def flush(self, lines: list[str], ind: str, guard: str = "") -> None:
        """Print what became computable; ``guard`` prefixes each store (``if (lane == 0) ``)."""
        progress = True
        while progress:
            progress = False
            for s in self._stmts:
                if s.var not in self._done and all(d in self.avail for d in s.deps):
                    lines.extend(elem_lines(self.spec, [s], self._load, row_index, ind=ind))
                    self._done.add(s.var)
                    self.avail.add(s.var)
                    progress = True
        for s in self.spec.stmts:
            if s.op == "store" and s.level == "row" and s.var in self.avail \
                    and id(s) not in self._stored:
                o = self.spec.operands[s.operand]
                lines.append(f"{ind}{guard}{self._store(o, row_index(o), s.var)}")
                self._stored.add(id(s))


def row_passes(spec: KernelSpec) -> Iterator[tuple[int, list[Stmt], list[Stmt]]]:
    """(pass number, its reductions, its per-element stores) for each pass over the row."""
    for p in range(1, spec.npasses + 1):
        yield (p, [s for s in spec.stmts if s.op == "reduce" and s.passno == p],
               [s for s in spec.stmts if s.op == "store" and s.level == "full" and s.passno == p])


# -- reductions ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reduction:
    """One reduction kind. ``{acc}`` is the accumulator's scalar type, ``{t}`` the state type."""

    state: str          # accumulator state type
    ident: str          # its identity
    combine: str        # functor merging two partial states (warp and block steps)
    c_init: str = ""    # C: start value of the scalar accumulator ("": two-pass kinds)
    c_omp: str = ""     # C: OpenMP reduction operator of the element loop ("": none)


REDUCTIONS = {
    "sum": Reduction("{acc}", "({acc})0", "sc_add()", "0", "+"),
    "prod": Reduction("{acc}", "({acc})1", "sc_mul()", "1", "*"),
    "max": Reduction("{acc}", "-({acc})SC_INF", "sc_maxop()", "-SC_INF"),
    "min": Reduction("{acc}", "({acc})SC_INF", "sc_minop()", "SC_INF"),
    "argmax": Reduction("sc_arg<{acc}>", "{t}{{-({acc})SC_INF, -1LL}}", "sc_argmax_comb()",
                        "-SC_INF"),
    "argmin": Reduction("sc_arg<{acc}>", "{t}{{({acc})SC_INF, -1LL}}", "sc_argmin_comb()",
                        "SC_INF"),
    "welford": Reduction("sc_wf<{acc}>", "{t}{{({acc})0, ({acc})0, ({acc})0}}", "sc_wf_comb()"),
    "softmax": Reduction("sc_sm<{acc}>", "{t}{{-({acc})SC_INF, ({acc})0}}", "sc_sm_comb()"),
}
# the state field each reduction output reads
FIELDS = {"sum": "", "r": "", "val": ".v", "idx": ".i", "mean": ".mean", "m2": ".m2", "m": ".m",
          "s": ".s"}


def state_type(s: Stmt, acc: str) -> str:
    return REDUCTIONS[s.kind].state.format(acc=acc)


def identity(s: Stmt, acc: str) -> str:
    return REDUCTIONS[s.kind].ident.format(acc=acc, t=state_type(s, acc))


def reduction_id(s: Stmt) -> str:
    """A reduction's name in the generated code: its first output variable."""
    return next(iter(s.outs.values()))


def acc_name(s: Stmt) -> str:
    """The accumulator variable of a reduction."""
    return "a" + reduction_id(s)


def update(kind: str, a: str, x: str, j: str, acc: str, val: str = "", idx: str = "") -> str:
    """Accumulator ``a`` takes element ``x`` (at row index ``j``); argmax/argmin keep the
    value in ``val`` and the index in ``idx`` (the state's fields by default)."""
    if kind == "sum":
        return f"{a} += {x};"
    if kind == "prod":
        return f"{a} *= {x};"
    if kind in ("max", "min"):
        c = ">" if kind == "max" else "<"
        return f"{a} = ({x} {c} {a} || {x} != {x}) ? {x} : {a};"
    if kind in ("argmax", "argmin"):
        c = ">" if kind == "argmax" else "<"
        val, idx = val or f"{a}.v", idx or f"{a}.i"
        return (f"if ({x} {c} {val} || {idx} < 0 || ({x} != {x} && {val} == {val})) "
                f"{{ {val} = {x}; {idx} = {j}; }}")
    if kind == "welford":
        return (f"{{ {a}.n += ({acc})1; const {acc} d = {x} - {a}.mean; "
                f"{a}.mean += d / {a}.n; {a}.m2 += d * ({x} - {a}.mean); }}")
    if kind == "softmax":
        # s * exp(m - x) is s * 0 from m = -inf: 0, or a NaN met before any number (kept);
        # an element equal to the max adds 1, also a second +inf (exp(inf - inf) is NaN):
        # ATen's logsumexp of a row holding +inf is +inf (the softmaxes read m = +inf as NaN)
        return (f"if ({x} > {a}.m) {{ {a}.s = {a}.s * sc_exp({a}.m - {x}) + ({acc})1; "
                f"{a}.m = {x}; }} "
                f"else if ({x} != -SC_INF) {{ {a}.s += {x} == {a}.m ? ({acc})1 : "
                f"sc_exp({x} - {a}.m); }}")
    raise ValueError(kind)


def group_update(kind: str, a: str, xs: list[str], acc: str) -> str:
    """Accumulator ``a`` takes the four elements of one float4 at once.

    Welford merges the group's own mean and M2 (Chan et al.): one division per four elements
    instead of one per element on the accumulator's dependency chain. Softmax rescales once
    per group, to the group's max, and adds one exponential per element with no branch;
    NaN still reaches the sum (``sc_max`` skips it, ``exp(NaN - m)`` does not), also where
    it comes before any number (m still -inf), -inf adds nothing and an element equal to the
    max adds 1 (+inf too), as in the element-wise update.
    """
    x0, x1, x2, x3 = xs
    z = f"({acc})"
    if kind == "welford":
        return (f"{{ const {acc} gm = ({x0} + {x1} + {x2} + {x3}) * {z}0.25; "
                f"const {acc} e0 = {x0} - gm, e1 = {x1} - gm, e2 = {x2} - gm, e3 = {x3} - gm; "
                f"{a}.n += {z}4; const {acc} d = gm - {a}.mean, f = {z}4 / {a}.n; "
                f"{a}.mean += d * f; "
                f"{a}.m2 += (e0 * e0 + e1 * e1) + (e2 * e2 + e3 * e3) + d * d * ({a}.n - {z}4) * f; }}")
    if kind == "softmax":
        def term(v: str) -> str:
            return f"({v} == -SC_INF ? {z}0 : {v} == {a}.m ? {z}1 : sc_exp({v} - {a}.m))"
        return (f"{{ const {acc} gm = sc_max(sc_max({x0}, {x1}), sc_max({x2}, {x3})); "
                f"if (gm > {a}.m) {{ {a}.s = {a}.s * sc_exp({a}.m - gm); {a}.m = gm; }} "
                f"{a}.s += ({term(x0)} + {term(x1)}) + ({term(x2)} + {term(x3)}); }}")
    raise ValueError(kind)
