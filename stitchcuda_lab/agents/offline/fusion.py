"""Lower a group of graph nodes into one kernel description (``KernelSpec``) both emitters read.

A group is either *pointwise* (every value has the output shape S; external operands broadcast
into it) or *rowwise*: S is split into row dims and reduced dims R; values are *full* (shape S,
one per element) or *row* (one per row: reductions and what is computed from them). Rowwise
kernels make passes over each row: a pass computes the reductions whose inputs are available,
the last pass writes the full outputs. High-level normalisations are expanded here:

- softmax: online max+sum in one pass, then exp(x - m) / s
- layer/group/instance/batch norm: one-pass Welford mean/var, then (x - mean) * rstd * w + b
- RMS norm: sum of squares, then x * rsqrt(ss / L + eps) * w

``build_spec`` raises ``Unsupported`` (with the reason a person reads) for anything else; the
planner uses it as the legality test for every fusion it proposes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ... import aten
from ...aten import FLOAT_DTYPES
from ...graph import Graph, Node
from .helpers import contiguous_strides, node_ref
from .ops import LOAD_DTYPES, REDUCTIONS, lit, pointwise_expr

# Views a kernel passes through: they keep every element in order (reshapes, size-1 dims,
# broadcasts, tuple items); other views (permute, slice, ...) stay in the library.
_KERNEL_VIEWS = ("getitem", "unsqueeze", "squeeze", "view", "reshape", "_unsafe_view", "flatten",
                 "alias", "expand")
MAX_FULL_REDUCTION = 1 << 16


class Unsupported(Exception):
    """This group cannot become one generated kernel; ``str(e)`` says why."""


@dataclass
class Operand:
    name: str                  # kernel parameter name
    node: str                  # graph node holding the tensor
    dtype: str
    shape: list[int]           # the tensor's own shape
    strides: list[int] = field(default_factory=list)  # element strides over the kernel dims
    role: str = "in"           # in | out | inout
    row: bool = False          # varies only over row dims

    def contiguous_in(self, dims: list[int]) -> bool:
        return self.strides == contiguous_strides(dims)


@dataclass
class Stmt:
    op: str                    # load | expr | reduce | store
    var: str = ""
    expr: str = ""
    deps: list[str] = field(default_factory=list)
    level: str = "full"        # full | row
    operand: int = -1          # load/store: operand index
    kind: str = ""             # reduce: sum | max | min | prod | argmax | argmin | welford | softmax
    outs: dict = field(default_factory=dict)  # reduce: role -> var (sum/max/idx/mean/m2/m/s)
    ctype: str = ""            # value type when not the accumulator type ("long long")
    passno: int = 0


@dataclass
class KernelSpec:
    name: str
    kind: str                  # pointwise | rowwise
    dims: list[int]            # iteration sizes, outermost first
    reduce: list[bool]         # per dim: reduced inside a row
    acc: str                   # float | double
    operands: list[Operand]
    stmts: list[Stmt]
    ops: list[str]             # graph nodes computed
    targets: list[str]         # their aten targets
    outputs: dict = field(default_factory=dict)   # graph node -> operand index written
    notes: list[str] = field(default_factory=list)
    npasses: int = 0

    @property
    def numel(self) -> int:
        return math.prod(self.dims) if self.dims else 1

    @property
    def rows(self) -> int:
        return math.prod(d for d, r in zip(self.dims, self.reduce) if not r) if self.dims else 1

    @property
    def rowlen(self) -> int:
        return math.prod(d for d, r in zip(self.dims, self.reduce) if r) if self.dims else 1

    def ins(self) -> list[Operand]:
        return [o for o in self.operands if o.role in ("in", "inout")]

    def stmt_of(self, var: str) -> Stmt:
        for s in self.stmts:
            if s.var == var or var in s.outs.values():
                return s
        raise KeyError(var)


def node_role(n: Node, graph: Graph | None = None) -> str | None:
    """How a node can take part in a generated kernel: pointwise | reduction | norm | view |
    None (library only)."""
    name = n.opname
    if n.op != "call_function" or n.mutates or name.endswith("_") and name != "_softmax" \
            and not name.startswith("_"):
        return None
    if aten.is_view(n.target):
        return "view" if name in _KERNEL_VIEWS else None
    if name == "batch_norm":
        return "norm" if n.args[5] else "pointwise"
    if name == "instance_norm":
        return "norm"
    if name in ("softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "group_norm",
                "rms_norm"):
        return "norm"
    if name in REDUCTIONS and n.op_class == "reduction":
        return "reduction"
    if n.op_class == "pointwise":
        overload = n.target.split(".")[-1]
        if pointwise_expr(name, overload, n.args, n.kwargs, lambda x: "v") is None:
            return None
        if n.dtype not in FLOAT_DTYPES + ("bool",):
            return None
        return "pointwise"
    return None


# ---------------------------------------------------------------------------------------------
def _row_geometry(n: Node, graph: Graph) -> tuple[list[int], list[int], tuple | None]:
    """(S, reduced dims, split) of a reduction or normalisation node."""
    x = graph.node(node_ref(n.args[0]))
    if x.shape is None:
        raise Unsupported(f"{n.name}: input shape unknown")
    S = list(x.shape)
    rank = len(S)
    name = n.opname

    def norm_dims(d):
        if d is None or d == []:
            return list(range(rank))
        d = d if isinstance(d, list) else [d]
        return sorted({(int(v) + rank) % rank if rank else 0 for v in d})

    a = n.args
    if name in ("sum", "mean", "amax", "amin", "logsumexp", "var", "std", "prod"):
        dims = a[1] if len(a) > 1 else n.kwargs.get("dim")
        if name in ("sum", "mean") and n.target.endswith(".default"):
            dims = None
        R = norm_dims(dims)
    elif name in ("max", "min", "argmax", "argmin"):
        dim = a[1] if len(a) > 1 else n.kwargs.get("dim")
        if name in ("max", "min") and not n.target.endswith(".dim"):
            dim = None
        R = norm_dims(dim)
    elif name in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
        R = norm_dims(a[1])
    elif name in ("layer_norm", "rms_norm"):
        k = len(a[1])
        R = list(range(rank - k, rank))
    elif name == "group_norm":
        G = int(a[1])
        if rank < 2 or S[1] % G:
            raise Unsupported(f"{n.name}: channels not divisible by groups")
        return S, [2 + i for i in range(rank - 1)], (1, G)
    elif name == "instance_norm":
        if rank < 3:
            raise Unsupported(f"{n.name}: instance norm needs spatial dims")
        R = list(range(2, rank))
    elif name == "batch_norm":
        R = [d for d in range(rank) if d != 1]
    else:
        raise Unsupported(f"{n.name}: {name} has no row template")
    return S, R, None


def build_spec(graph: Graph, ops: list[str], kname: str = "k0") -> KernelSpec:
    """One kernel for the given nodes (library GEMM/conv nodes in ``ops`` are skipped)."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    nodes = sorted((graph.node(o) for o in ops), key=lambda n: order[n.name])
    nodes = [n for n in nodes if not aten.is_library(n.target)]
    if not nodes:
        raise Unsupported("nothing to generate")
    members = {n.name for n in nodes}
    roles = {}
    for n in nodes:
        r = node_role(n, graph)
        if r is None:
            raise Unsupported(f"{n.name}: {n.target} has no kernel template")
        roles[n.name] = r
    # -- geometry -----------------------------------------------------------------------------
    geo = None
    for n in nodes:
        if roles[n.name] in ("reduction", "norm"):
            g = _row_geometry(n, graph)
            if geo is None:
                geo = g
            elif (list(g[0]), list(g[1]), g[2]) != (list(geo[0]), list(geo[1]), geo[2]):
                raise Unsupported(f"{n.name}: reduces over other rows than the rest of the group")
    if geo is None:
        shapes = [n.shape for n in nodes if roles[n.name] != "view" and n.shape is not None]
        if not shapes:
            raise Unsupported("no shaped values")
        S = max(shapes, key=lambda s: math.prod(s))
        R: list[int] = []
        split = None
    else:
        S, R, split = list(geo[0]), list(geo[1]), geo[2]
    rank = len(S)
    Rset = set(R)
    if split is not None:
        # R is given in split coordinates for group norm: convert back to S dims for the
        # level bookkeeping (dim 1 is only partly reduced; handled by the split below)
        Rs = {d - 1 for d in R if d - 1 >= 2} | set()
        Rset = Rs  # spatial dims of S; channel dim reduces inside the split
    numel_rows_reduced = math.prod(S[d] for d in range(rank) if d in Rset) if rank else 1
    if geo is not None and len(Rset) == rank and split is None and math.prod(S) > MAX_FULL_REDUCTION:
        raise Unsupported(f"full reduction over {math.prod(S)} elements needs a grid-wide "
                          "reduction (no template)")
    del numel_rows_reduced
    [1 if d in Rset or (split is not None and d == split[0]) else S[d]
                for d in range(rank)]
    if split is not None:
        # group norm rows are (n, g): one row value per group, not per channel
        pass  # row values are not exposed outside a group-norm kernel
    keep_form = [1 if d in Rset else S[d] for d in range(rank)]
    drop_form = [S[d] for d in range(rank) if d not in Rset]
    nonR = [d for d in range(rank) if d not in Rset]

    acc = "double" if any(n.dtype == "float64" for n in nodes) or any(
        graph.node(r).dtype == "float64" for n in nodes for r in n.inputs()) else "float"
    def L(v):  # noqa: N802  (reads like the literal it makes)
        return lit(v, acc)

    operands: list[Operand] = []
    sviews: list[list[int]] = []
    stmts: list[Stmt] = []
    env: dict[str, Any] = {}       # node -> var (or tuple of vars)
    level: dict[str, str] = {}     # var -> full | row
    ctypes: dict[str, str] = {}
    counter = [0]

    def new_var() -> str:
        counter[0] += 1
        return f"v{counter[0]}"

    def out_map(shape: list[int]) -> list[int]:
        if shape == list(S):
            return list(range(rank))
        if geo is not None and shape == keep_form:
            return list(range(rank))
        if geo is not None and shape == drop_form:
            return nonR
        raise Unsupported(f"shape {shape} is neither the group shape {S} nor its row shape")

    def load(ref: str, sview: list[int], astrides: list[int]) -> str:
        src = graph.node(ref)
        if src.dtype not in LOAD_DTYPES:
            raise Unsupported(f"{ref}: dtype {src.dtype} cannot be read by a generated kernel")
        for i, o in enumerate(operands):
            if o.role == "in" and o.node == ref and o.strides == astrides:
                for s in stmts:
                    if s.op == "load" and s.operand == i:
                        return s.var
        idx = len(operands)
        row = all(sview[d] == 1 for d in range(rank) if d in Rset) and geo is not None \
            and (split is None or sview[split[0]] == 1 or True)
        operands.append(Operand(name=f"in{idx}", node=ref, dtype=src.dtype,
                                shape=list(src.shape or []), strides=astrides, role="in",
                                row=row))
        sviews.append(sview)
        v = new_var()
        lvl = "row" if (geo is not None and all(sview[d] == 1 for d in range(rank)
                                                 if d in Rset or (split and d == split[0]))) \
            else "full"
        stmts.append(Stmt(op="load", var=v, operand=idx, level=lvl))
        level[v] = lvl
        return v

    def tensor_arg(ref: str, out_shape: list[int]) -> str:
        """Variable for tensor ``ref`` broadcast to ``out_shape`` (a value of this node)."""
        src = graph.node(ref)
        if src.shape is None:
            raise Unsupported(f"{ref}: not a tensor")
        a_shape = list(src.shape)
        if len(a_shape) > len(out_shape):
            raise Unsupported(f"{ref}: broadcasts to a larger shape than its consumer")
        omap = out_map(out_shape)
        sview = [1] * rank
        astr = [0] * rank
        cst = contiguous_strides(a_shape)
        off = len(out_shape) - len(a_shape)
        for k, sz in enumerate(a_shape):
            od = off + k
            if sz != 1 and sz != out_shape[od]:
                raise Unsupported(f"{ref}: shape {a_shape} does not broadcast to {out_shape}")
            if sz != 1:
                sview[omap[od]] = sz
                astr[omap[od]] = cst[k]
        if ref in members:
            v = env[ref]
            if isinstance(v, tuple):
                raise Unsupported(f"{ref}: tuple value used directly")
            want = list(S) if level[v] == "full" else keep_form
            if sview != want:
                raise Unsupported(f"{ref}: broadcasting inside the group does not follow its rows")
            return v
        return load(ref, sview, astr)

    def scalar_or_tensor(x: Any, out_shape: list[int]) -> str:
        r = node_ref(x)
        if r is not None:
            return tensor_arg(r, out_shape)
        if isinstance(x, (int, float, bool)):
            return L(x)
        raise Unsupported(f"argument {x!r} is not a number or tensor")

    def emit(expr: str, deps: list[str], lvl: str | None = None, ctype: str = "") -> str:
        v = new_var()
        if lvl is None:
            lvl = "full" if any(level.get(d) == "full" for d in deps) else "row"
        stmts.append(Stmt(op="expr", var=v, expr=expr, deps=deps, level=lvl, ctype=ctype))
        level[v] = lvl
        if ctype:
            ctypes[v] = ctype
        return v

    def vars_in(expr: str) -> list[str]:
        import re
        return sorted(set(re.findall(r"\bv\d+\b", expr)))

    def reduce_(kind: str, x: str, roles_: list[str]) -> dict:
        if level.get(x) != "full":
            raise Unsupported("reduction of a value that is not per-element")
        outs = {}
        for r in roles_:
            v = new_var()
            outs[r] = v
            level[v] = "row"
            if r == "idx":
                ctypes[v] = "long long"
        stmts.append(Stmt(op="reduce", kind=kind, deps=[x], outs=outs, level="row",
                          var=""))
        return outs

    def full_input(n: Node) -> str:
        ref = node_ref(n.args[0])
        if ref is None:
            raise Unsupported(f"{n.name}: input is not a tensor")
        v = tensor_arg(ref, list(S))
        if level[v] != "full":
            raise Unsupported(f"{n.name}: input is not per-element")
        return v

    def param(x: Any) -> str | None:
        r = node_ref(x)
        if r is None:
            return None
        src = graph.node(r)
        # per-channel (dim 1) parameter of a norm: view [C] as [1, C, 1, ...]
        view = [1] * rank
        strides = [0] * rank
        if len(src.shape) == 1 and rank >= 2 and src.shape[0] == S[1]:
            view[1], strides[1] = S[1], 1
        else:
            return tensor_arg(r, list(S))
        return load(r, view, strides)

    rowlen = math.prod(S[d] for d in range(rank) if d in Rset)
    if split is not None:
        rowlen *= S[split[0]] // split[1]

    for n in nodes:
        role = roles[n.name]
        name = n.opname
        if n.dtype is not None and n.dtype not in FLOAT_DTYPES + ("bool", "int64"):
            raise Unsupported(f"{n.name}: dtype {n.dtype}")
        if role == "pointwise" and name == "batch_norm":       # eval: running statistics
            x = full_input(n)
            w, b, rm, rv = (param(n.args[i]) for i in (1, 2, 3, 4))
            eps = n.args[7]
            if rm is None or rv is None:
                raise Unsupported(f"{n.name}: eval batch norm without running stats")
            e = f"(({x} - {rm}) * sc_rsqrt({rv} + {L(eps)}))"
            if w:
                e = f"({e} * {w})"
            if b:
                e = f"({e} + {b})"
            env[n.name] = emit(e, vars_in(e))
            continue
        if role == "pointwise":
            if n.shape is None:
                raise Unsupported(f"{n.name}: no shape")
            out_shape = list(n.shape)
            out_map(out_shape)
            if name in ("_to_copy", "to", "type_as"):
                src = graph.node(node_ref(n.args[0]))
                if n.dtype not in FLOAT_DTYPES or (src.dtype in FLOAT_DTYPES and (
                        aten.dtype_bytes(n.dtype) < aten.dtype_bytes(src.dtype)
                        or {n.dtype, src.dtype} == {"float16", "bfloat16"})):
                    raise Unsupported(f"{n.name}: narrowing conversion to {n.dtype}")
            overload = n.target.split(".")[-1]
            e = pointwise_expr(name, overload, n.args, n.kwargs,
                               lambda x, out_shape=out_shape: scalar_or_tensor(x, out_shape), acc)
            if e is None:
                raise Unsupported(f"{n.name}: {n.target} has no template")
            deps = vars_in(e)
            lvl = "full" if out_shape == list(S) and (geo is None or any(
                level.get(d) == "full" for d in deps) or out_shape != keep_form) else "row"
            if geo is None:
                lvl = "full"
            env[n.name] = emit(e, deps, lvl)
            continue
        if role == "view":
            src_ref = node_ref(n.args[0])
            if src_ref not in members:
                raise Unsupported(f"{n.name}: view of a tensor outside the group")
            v = env[src_ref]
            if n.target == "getitem":
                if not isinstance(v, tuple):
                    raise Unsupported(f"{n.name}: getitem of a plain value")
                env[n.name] = v[int(n.args[1])]
                continue
            if isinstance(v, tuple) or n.shape is None:
                raise Unsupported(f"{n.name}: view of a tuple")
            if level[v] == "full" and list(n.shape) != list(S):
                raise Unsupported(f"{n.name}: reshapes a per-element value")
            if level[v] == "row" and list(n.shape) not in (keep_form, drop_form):
                raise Unsupported(f"{n.name}: reshapes a row value")
            env[n.name] = v
            continue
        if role == "reduction":
            x = full_input(n)
            kind = REDUCTIONS[name]
            if name in ("max", "min") and n.target.endswith(".dim"):
                o = reduce_("argmax" if name == "max" else "argmin", x, ["val", "idx"])
                env[n.name] = (o["val"], o["idx"])
            elif name in ("argmax", "argmin"):
                o = reduce_(kind, x, ["val", "idx"])
                env[n.name] = o["idx"]
            elif name in ("sum", "mean"):
                o = reduce_("sum", x, ["sum"])
                env[n.name] = o["sum"] if name == "sum" else emit(
                    f"({o['sum']} / {L(rowlen)})", [o["sum"]], "row")
            elif name in ("amax", "amin", "prod"):
                o = reduce_({"amax": "max", "amin": "min", "prod": "prod"}[name], x, ["r"])
                env[n.name] = o["r"]
            elif name in ("var", "std"):
                corr = n.kwargs.get("correction")
                if corr is None:
                    unbiased = n.args[2] if len(n.args) > 2 and isinstance(n.args[2], bool) \
                        else True
                    corr = 1 if unbiased else 0
                o = reduce_("welford", x, ["mean", "m2"])
                e = f"({o['m2']} / {L(max(rowlen - corr, 0))})"
                if name == "std":
                    e = f"sqrt{e}"
                env[n.name] = emit(e, [o["m2"]], "row")
            elif name == "logsumexp":
                o = reduce_("softmax", x, ["m", "s"])
                env[n.name] = emit(f"({o['m']} + sc_log({o['s']}))", [o["m"], o["s"]], "row")
            else:
                raise Unsupported(f"{n.name}: {name}")
            if n.shape is not None and list(n.shape) not in (keep_form, drop_form):
                raise Unsupported(f"{n.name}: output shape {n.shape}")
            continue
        # normalisations
        x = full_input(n)
        if name in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
            o = reduce_("softmax", x, ["m", "s"])
            if "log" in name:
                lse = emit(f"({o['m']} + sc_log({o['s']}))", [o["m"], o["s"]], "row")
                env[n.name] = emit(f"({x} - {lse})", [x, lse], "full")
            else:
                inv = emit(f"({L(1)} / {o['s']})", [o["s"]], "row")
                env[n.name] = emit(f"(sc_exp({x} - {o['m']}) * {inv})", [x, o["m"], inv], "full")
            continue
        if name == "rms_norm":
            eps = n.args[3] if len(n.args) > 3 else n.kwargs.get("eps")
            if eps is None:
                eps = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16,
                       "float16": 0.0009765625, "bfloat16": 0.0078125}[graph.node(
                           node_ref(n.args[0])).dtype]
            sq = emit(f"({x} * {x})", [x], "full")
            o = reduce_("sum", sq, ["sum"])
            rstd = emit(f"sc_rsqrt({o['sum']} / {L(rowlen)} + {L(eps)})", [o["sum"]], "row")
            e = f"({x} * {rstd})"
            w = tensor_arg(node_ref(n.args[2]), list(S)) if len(n.args) > 2 and node_ref(n.args[2]) \
                else None
            if w:
                e = f"({e} * {w})"
            env[n.name] = emit(e, vars_in(e), "full")
            continue
        # mean/variance norms
        if name == "layer_norm":
            w = tensor_arg(node_ref(n.args[2]), list(S)) if len(n.args) > 2 and node_ref(n.args[2]) else None
            b = tensor_arg(node_ref(n.args[3]), list(S)) if len(n.args) > 3 and node_ref(n.args[3]) else None
            eps = n.args[4] if len(n.args) > 4 else 1e-5
        elif name == "group_norm":
            w = param(n.args[2]) if len(n.args) > 2 else None
            b = param(n.args[3]) if len(n.args) > 3 else None
            eps = n.args[4] if len(n.args) > 4 else 1e-5
        elif name == "instance_norm":
            if node_ref(n.args[3]) or node_ref(n.args[4]):
                raise Unsupported(f"{n.name}: instance norm with running statistics")
            if not n.args[5]:
                raise Unsupported(f"{n.name}: instance norm without input statistics")
            w, b = param(n.args[1]), param(n.args[2])
            eps = n.args[7]
        elif name == "batch_norm":
            w, b = param(n.args[1]), param(n.args[2])
            eps, mom = n.args[7], n.args[6]
            if mom is None:
                raise Unsupported(f"{n.name}: cumulative-average batch norm")
        else:
            raise Unsupported(f"{n.name}: {name}")
        o = reduce_("welford", x, ["mean", "m2"])
        rstd = emit(f"sc_rsqrt({o['m2']} / {L(rowlen)} + {L(eps)})", [o["m2"]], "row")
        e = f"(({x} - {o['mean']}) * {rstd})"
        if w:
            e = f"({e} * {w})"
        if b:
            e = f"({e} + {b})"
        env[n.name] = emit(e, vars_in(e), "full")
        if name == "batch_norm":
            if rowlen < 2:
                raise Unsupported(f"{n.name}: batch norm over one value")
            for argi, stat in ((3, "mean"), (4, "var")):
                ref = node_ref(n.args[argi])
                if ref is None:
                    continue
                src = graph.node(ref)
                view, strides = [1] * rank, [0] * rank
                view[1], strides[1] = S[1], 1
                old = load(ref, view, strides)
                idx = next(s.operand for s in stmts if s.var == old)
                operands[idx].role = "inout"
                operands[idx].name = f"io{idx}"
                val = o["mean"] if stat == "mean" else \
                    f"({o['m2']} / {L(rowlen - 1)})"
                upd = emit(f"(({L(1 - mom)}) * {old} + {L(mom)} * {val})",
                           vars_in(f"{old} {val}"), "row")
                stmts.append(Stmt(op="store", var=upd, operand=idx, level="row", deps=[upd]))
                del src

    # -- outputs --------------------------------------------------------------------------------
    users = graph.users()
    outputs: dict[str, int] = {}
    for n in nodes:
        v = env.get(n.name)
        if isinstance(v, tuple) or v is None:
            outside = [u for u in users.get(n.name, []) if u not in members]
            if outside:
                raise Unsupported(f"{n.name}: tuple result used outside the group")
            continue
        outside = [u for u in users.get(n.name, []) if u not in members]
        if not outside:
            continue
        if n.shape is None:
            raise Unsupported(f"{n.name}: output without shape")
        if level[v] == "row" and geo is not None and split is not None:
            raise Unsupported(f"{n.name}: group-norm row value used outside")
        oshape = list(n.shape)
        if level[v] == "full" and oshape != list(S):
            raise Unsupported(f"{n.name}: output shape {oshape} differs from {S}")
        omap = out_map(oshape) if level[v] == "row" else list(range(rank))
        astr = [0] * rank
        cst = contiguous_strides(oshape)
        for k, sz in enumerate(oshape):
            if sz != 1:
                astr[omap[k]] = cst[k]
        idx = len(operands)
        dtype = n.dtype if n.dtype else "float32"
        if ctypes.get(v) == "long long":
            dtype = "int64"
        operands.append(Operand(name=f"out{idx}", node=n.name, dtype=dtype, shape=oshape,
                                strides=astr, role="out", row=level[v] == "row"))
        sviews.append(list(S))
        stmts.append(Stmt(op="store", var=v, operand=idx, level=level[v], deps=[v]))
        outputs[n.name] = idx
    if not outputs:
        raise Unsupported("the group has no outputs")
    for s in stmts:
        if s.op == "expr":
            for d in s.deps:
                if ctypes.get(d) == "long long":
                    raise Unsupported("arithmetic on indices")

    # -- kernel dims: split (group norm), then coalesce ---------------------------------------------
    dims = list(S)
    red = [d in Rset for d in range(rank)]
    strides = [list(o.strides) for o in operands]
    if split is not None:
        d, G = split
        C = S[d]
        dims = dims[:d] + [G, C // G] + dims[d + 1:]
        red = red[:d] + [False, True] + red[d + 1:]
        strides = [st[:d] + [st[d] * (C // G), st[d]] + st[d + 1:] for st in strides]
    dims, red, strides = coalesce(dims, red, strides)
    for o, st in zip(operands, strides):
        o.strides = st
        if geo is not None:
            o.row = all(s == 0 for s, r in zip(st, red) if r)
    kind = "rowwise" if geo is not None else "pointwise"
    spec = KernelSpec(name=kname, kind=kind, dims=dims, reduce=red, acc=acc, operands=operands,
                      stmts=stmts, ops=[n.name for n in nodes],
                      targets=sorted({n.target for n in nodes if n.target != "getitem"}),
                      outputs=outputs)
    _assign_passes(spec)
    _prune(spec)
    return spec


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


def _assign_passes(spec: KernelSpec) -> None:
    """Pass numbers: a reduction runs in the pass after the row values it needs; full outputs
    are written in the last pass."""
    avail: dict[str, int] = {}
    for s in spec.stmts:
        if s.op == "load":
            avail[s.var] = 0
        elif s.op == "expr":
            avail[s.var] = max((avail.get(d, 0) for d in s.deps), default=0)
        elif s.op == "reduce":
            p = 1 + _row_avail(spec, s.deps[0], avail)
            s.passno = p
            for v in s.outs.values():
                avail[v] = p
    last = max((s.passno for s in spec.stmts if s.op == "reduce"), default=0)
    spec.npasses = last + (1 if any(s.op == "store" and s.level == "full" for s in spec.stmts)
                           or last == 0 else 0)
    for s in spec.stmts:
        if s.op == "store":
            s.passno = spec.npasses if s.level == "full" else avail.get(s.var, 0)


def _row_avail(spec: KernelSpec, var: str, avail: dict) -> int:
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


def _prune(spec: KernelSpec) -> None:
    """Drop statements nothing stored depends on."""
    need: set[str] = set()
    for s in spec.stmts:
        if s.op == "store":
            need.add(s.var)
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
    keep = []
    for s in spec.stmts:
        produced = [s.var] if s.var else list(s.outs.values())
        if s.op == "store" or any(p in need for p in produced):
            keep.append(s)
    spec.stmts = keep


def deps_closure(spec: KernelSpec, roots: list[str], stop_at_reduce: bool = True) -> list[Stmt]:
    """Statements (in order) needed to compute ``roots``; reductions count as inputs."""
    need: set[str] = set(roots)
    changed = True
    while changed:
        changed = False
        for s in spec.stmts:
            if s.op in ("load", "expr") and s.var in need:
                for d in s.deps:
                    if d not in need:
                        need.add(d)
                        changed = True
    return [s for s in spec.stmts if s.op in ("load", "expr") and s.var in need]
