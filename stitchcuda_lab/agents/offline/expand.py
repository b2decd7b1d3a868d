"""Per-op expansion: what each aten op a kernel can compute becomes in the IR.

``node_role`` says how a node can take part in a kernel; ``row_geometry`` which dims a
reduction or normalisation reduces; ``expand`` turns one node into statements on the group
being lowered (``lower.Lowering``). High-level normalisations are expanded here:

- softmax: online max+sum in one pass, then exp(x - m) / s
- layer/group/instance/batch norm: one-pass Welford mean/var, then (x - mean) * rstd * w + b
- RMS norm: sum of squares, then x * rsqrt(ss / L + eps) * w

Pointwise ops are one C expression each (``pointwise.py``).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from ... import aten
from ...aten import FLOAT_DTYPES
from .helpers import node_ref
from .ir import Stmt, Unsupported
from .pointwise import is_pointwise_supported, pointwise_expr
from .pool import CONVS, POOLS, conv_window, dense_form, depthwise_form, pool_window

if TYPE_CHECKING:
    from ...graph import Graph, Node

# The lowering state (``lower.Lowering``) that every expansion extends: lower.py calls into this
# module, so this module names the type without importing it (no import circle).
Lowering = Any

# Views a kernel passes through: they keep every element in order (reshapes, size-1 dims,
# broadcasts, tuple items); other views (permute, slice, ...) stay in the library.
KERNEL_VIEWS = ("getitem", "unsqueeze", "squeeze", "view", "reshape", "_unsafe_view", "flatten",
                "alias", "expand")
# Row reductions the kernels implement: aten op name -> reduction kind.
REDUCTIONS = {
    "sum": "sum", "mean": "sum", "amax": "max", "amin": "min", "max": "max", "min": "min",
    "argmax": "argmax", "argmin": "argmin", "var": "welford", "std": "welford",
    "var_mean": "welford",
    "logsumexp": "softmax", "prod": "prod", "linalg_vector_norm": "sum",
}
# Scans along one dim: aten op name -> running combine.
SCANS = {"cumsum": "sum", "cumprod": "prod"}
NORMALIZATIONS = ("softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "group_norm",
                  "instance_norm", "batch_norm", "rms_norm")
SOFTMAXES = ("softmax", "_softmax", "log_softmax", "_log_softmax")
# rms_norm's default eps: torch.finfo(dtype).eps of the input
_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16,
        "float16": 0.0009765625, "bfloat16": 0.0078125}


def node_role(n: Node, graph: Graph | None = None) -> str | None:
    """How a node can take part in a generated kernel: pointwise | reduction | norm | scan |
    pool | view | None (library only). A depthwise convolution, and on the GPU a dense one of
    few input channels, is a ``pool`` (a weighted window) where ``graph`` shows its input and
    weights fit one (``pool.conv_window``); without the graph it is a library op."""
    name = n.opname
    if n.op != "call_function" or n.mutates or (
            name.endswith("_") and name != "_softmax" and not name.startswith("_")):
        return None
    if aten.is_view(n.target):
        return "view" if name in KERNEL_VIEWS else None
    if name == "batch_norm":
        return "norm" if n.args[5] else "pointwise"
    if name in NORMALIZATIONS:
        return "norm"
    if name in REDUCTIONS and n.op_class == "reduction":
        return "reduction"
    if name == "gather" and n.dtype in FLOAT_DTYPES:
        return "gather"
    if name in SCANS and n.op_class == "reduction" and n.dtype in FLOAT_DTYPES \
            and n.kwargs.get("dtype") is None:
        return "scan"
    if name in POOLS and n.op_class == "reduction" and n.dtype in FLOAT_DTYPES:
        return "pool"
    if name in CONVS and graph is not None and n.dtype in FLOAT_DTYPES and (
            depthwise_form(n) or dense_form(n, graph)):
        try:
            conv_window(n, graph)
        except Unsupported:
            return None   # grouped with several channels per group, ...: the library's
        return "pool"     # a depthwise or small dense convolution: a weighted window (pool.py)
    if n.op_class == "pointwise":
        if not is_pointwise_supported(name, aten.overload(n.target), n.args, n.kwargs):
            return None
        if n.dtype not in FLOAT_DTYPES + ("bool",):
            return None
        return "pointwise"
    return None


def kept_in_library(n: Node, graph: Graph) -> bool:
    """A library op (GEMM, convolution, attention) that stays a library call even inside a
    kernel's group: every one but a depthwise convolution or a small dense one on the GPU,
    which a kernel computes."""
    return aten.is_library(n.target) and node_role(n, graph) != "pool"


def row_geometry(n: Node, graph: Graph) -> tuple[list[int], list[int], tuple | None]:
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
    if name in ("sum", "mean", "amax", "amin", "logsumexp", "var", "std", "prod", "var_mean"):
        dims = a[1] if len(a) > 1 else n.kwargs.get("dim")
        if name in ("sum", "mean") and n.target.endswith(".default"):
            dims = None
        R = norm_dims(dims)
    elif name in ("max", "min", "argmax", "argmin"):
        dim = a[1] if len(a) > 1 else n.kwargs.get("dim")
        if name in ("max", "min") and not n.target.endswith(".dim"):
            dim = None
        R = norm_dims(dim)
    elif name in SOFTMAXES or name in SCANS:
        R = norm_dims(a[1])
    elif name == "linalg_vector_norm":
        R = norm_dims(a[2] if len(a) > 2 else n.kwargs.get("dim"))
    elif name == "gather":
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


def vars_in(expr: str) -> list[str]:
    """The IR variables an expression reads, sorted."""
    return sorted(set(re.findall(r"\bv\d+\b", expr)))


def expand(lw: Lowering, n: Node, role: str) -> None:
    """Statements computing node ``n`` in the group ``lw``; its value goes to ``lw.env``."""
    name = n.opname
    if role == "pointwise" and name == "batch_norm":       # eval: running statistics
        _eval_batch_norm(lw, n)
    elif role == "pointwise":
        _pointwise(lw, n)
    elif role == "view":
        _view(lw, n)
    elif role == "reduction":
        _reduction(lw, n)
    elif role == "gather":
        _gather(lw, n)
    elif role == "pool":
        lw.window(True)
        ref = node_ref(n.args[0])
        x = lw.tensor_arg(ref, lw.S) if ref is not None else None
        lw.window(False)
        if x is None:
            raise Unsupported(f"{n.name}: input is not a tensor")
        if name in CONVS:
            _depthwise(lw, n, x)
        else:
            lw.env[n.name] = lw.pool(x, pool_window(n, lw.graph))
    elif role == "scan":
        lw.env[n.name] = lw.scan(SCANS[name], lw.full_input(n), bool(n.kwargs.get("reverse")))
    else:
        x = lw.full_input(n)
        if name in SOFTMAXES:
            _softmax(lw, n, x)
        elif name == "rms_norm":
            _rms_norm(lw, n, x)
        else:
            _mean_var_norm(lw, n, x)


def _depthwise(lw: Lowering, n: Node, x: str) -> None:
    """A depthwise (or dense) convolution: its window weighs ``x`` by the weights of the
    output's channel (read by the kernel itself, ``pool.py``); the bias is added per output
    element."""
    window, wref, bref = conv_window(n, lw.graph)
    window["weight"] = lw.raw_operand(wref)
    v = lw.pool(x, window)
    if bref is not None:
        rank = len(lw.S)
        cdim = rank - window["nd"] - 1
        view = [window["channels"] if d == cdim else 1 for d in range(rank)]
        b = lw.load(bref, view, [1 if d == cdim else 0 for d in range(rank)])
        v = lw.emit(f"({v} + {b})", [v, b])
    lw.env[n.name] = v


def _scale_shift(e: str, w: str | None, b: str | None) -> str:
    if w:
        e = f"({e} * {w})"
    if b:
        e = f"({e} + {b})"
    return e


def _eval_batch_norm(lw: Lowering, n: Node) -> None:
    x = lw.full_input(n)
    w, b, rm, rv = (lw.param(n.args[i]) for i in (1, 2, 3, 4))
    eps = n.args[7]
    if rm is None or rv is None:
        raise Unsupported(f"{n.name}: eval batch norm without running stats")
    e = _scale_shift(f"(({x} - {rm}) * sc_rsqrt({rv} + {lw.lit(eps)}))", w, b)
    lw.env[n.name] = lw.emit(e, vars_in(e))


def _pointwise(lw: Lowering, n: Node) -> None:
    if n.shape is None:
        raise Unsupported(f"{n.name}: no shape")
    out_shape = list(n.shape)
    lw.out_map(out_shape)
    if n.opname in ("_to_copy", "to", "type_as"):
        src = lw.graph.node(node_ref(n.args[0]))
        if n.dtype not in FLOAT_DTYPES or (src.dtype in FLOAT_DTYPES and (
                aten.dtype_bytes(n.dtype) < aten.dtype_bytes(src.dtype)
                or {n.dtype, src.dtype} == {"float16", "bfloat16"})):
            raise Unsupported(f"{n.name}: narrowing conversion to {n.dtype}")
    e = pointwise_expr(n.opname, aten.overload(n.target), n.args, n.kwargs,
                       lambda x: lw.scalar_or_tensor(x, out_shape), lw.acc)
    if e is None:
        raise Unsupported(f"{n.name}: {n.target} has no template")
    deps = vars_in(e)
    full = not lw.rowwise or (out_shape == lw.S and (
        any(lw.level.get(d) == "full" for d in deps) or out_shape != lw.keep_form))
    lw.env[n.name] = lw.emit(e, deps, "full" if full else "row")


def _view(lw: Lowering, n: Node) -> None:
    src_ref = node_ref(n.args[0])
    if src_ref not in lw.members:
        raise Unsupported(f"{n.name}: view of a tensor outside the group")
    v = lw.env[src_ref]
    if n.target == "getitem":
        if not isinstance(v, tuple):
            raise Unsupported(f"{n.name}: getitem of a plain value")
        lw.env[n.name] = v[int(n.args[1])]
        return
    if isinstance(v, tuple) or n.shape is None:
        raise Unsupported(f"{n.name}: view of a tuple")
    if lw.level[v] in ("full", "win") and list(n.shape) != lw.S:
        raise Unsupported(f"{n.name}: reshapes a per-element value")
    if lw.level[v] == "row" and list(n.shape) not in (lw.keep_form, lw.drop_form):
        raise Unsupported(f"{n.name}: reshapes a row value")
    lw.env[n.name] = v


def _reduction(lw: Lowering, n: Node) -> None:
    name = n.opname
    x = lw.full_input(n)
    if name in ("max", "min") and n.target.endswith(".dim"):
        o = lw.reduce("argmax" if name == "max" else "argmin", x, ["val", "idx"])
        lw.env[n.name] = (o["val"], o["idx"])
    elif name in ("argmax", "argmin"):
        o = lw.reduce(REDUCTIONS[name], x, ["val", "idx"])
        lw.env[n.name] = o["idx"]
    elif name in ("sum", "mean"):
        o = lw.reduce("sum", x, ["sum"])
        lw.env[n.name] = o["sum"] if name == "sum" else lw.emit(
            f"({o['sum']} / {lw.lit(lw.rowlen)})", [o["sum"]], "row")
    elif name in ("amax", "amin", "prod"):
        o = lw.reduce({"amax": "max", "amin": "min", "prod": "prod"}[name], x, ["r"])
        lw.env[n.name] = o["r"]
    elif name in ("var", "std", "var_mean"):
        corr = n.kwargs.get("correction")
        if corr is None:
            unbiased = n.args[2] if len(n.args) > 2 and isinstance(n.args[2], bool) else True
            corr = 1 if unbiased else 0
        o = lw.reduce("welford", x, ["mean", "m2"])
        e = f"({o['m2']} / {lw.lit(max(lw.rowlen - corr, 0))})"
        if name == "std":
            e = f"sqrt{e}"
        var = lw.emit(e, [o["m2"]], "row")
        # var_mean: both from the one pass, as its (var, mean) tuple for its getitems
        lw.env[n.name] = (var, o["mean"]) if name == "var_mean" else var
    elif name == "linalg_vector_norm":
        _vector_norm(lw, n, x)
    elif name == "logsumexp":
        o = lw.reduce("softmax", x, ["m", "s"])
        lw.env[n.name] = lw.emit(f"({o['m']} + sc_log({o['s']}))", [o["m"], o["s"]], "row")
    else:
        raise Unsupported(f"{n.name}: {name}")
    if n.shape is not None and list(n.shape) not in (lw.keep_form, lw.drop_form):
        raise Unsupported(f"{n.name}: output shape {n.shape}")


def _vector_norm(lw: Lowering, n: Node, x: str) -> None:
    """``||x||_ord`` of each row: ord 2 a sum of squares, 1 a sum of |x|, inf/-inf the
    largest/smallest |x|, other ords sum(|x|^ord)^(1/ord)."""
    ordv = n.args[1] if len(n.args) > 1 else n.kwargs.get("ord", 2)
    if not isinstance(ordv, (int, float)) or isinstance(ordv, bool) or ordv == 0:
        raise Unsupported(f"{n.name}: vector norm of order {ordv!r}")
    ordv = float(ordv)
    ax = lw.emit(f"fabs({x})", [x], "full")
    if ordv in (float("inf"), float("-inf")):
        o = lw.reduce("max" if ordv > 0 else "min", ax, ["r"])
        lw.env[n.name] = o["r"]
        return
    if ordv == 2:
        o = lw.reduce("sum", lw.emit(f"({x} * {x})", [x], "full"), ["sum"])
        lw.env[n.name] = lw.emit(f"sqrt({o['sum']})", [o["sum"]], "row")
    elif ordv == 1:
        lw.env[n.name] = lw.reduce("sum", ax, ["sum"])["sum"]
    else:
        o = lw.reduce("sum", lw.emit(f"pow({ax}, {lw.lit(ordv)})", [ax], "full"), ["sum"])
        lw.env[n.name] = lw.emit(f"pow({o['sum']}, {lw.lit(1.0 / ordv)})", [o["sum"]], "row")


def _gather(lw: Lowering, n: Node) -> None:
    """``gather(x, d, idx)`` with one index per row (``idx`` of the row shape): the row's
    element at ``idx``, read directly (a cross-entropy's target logit)."""
    x_ref, idx_ref = node_ref(n.args[0]), node_ref(n.args[2])
    x, idx = lw.graph.node(x_ref), lw.graph.node(idx_ref)
    if x_ref in lw.members or len(lw.Rset) != 1 or lw.split is not None \
            or x.dtype not in ("float32", "float64") or idx.dtype != "int64" \
            or list(idx.shape or []) != lw.keep_form or lw.S != list(x.shape or []):
        raise Unsupported(f"{n.name}: gather of one element per row of an input only")
    lw.full_input(n)    # x read per element too: its operand and row base exist
    t = lw.tensor_arg(idx_ref, lw.keep_form)
    d = next(iter(lw.Rset))
    op = next(o for o in lw.operands if o.node == x_ref and o.role == "in")
    stride = op.strides[d]
    e = (f"(({lw.acc}){op.name}[b_{op.name} + (long long)({t}) * {stride}LL])")
    lw.env[n.name] = lw.emit(e, [t], "row")


def _softmax(lw: Lowering, n: Node, x: str) -> None:
    # a row whose max is +inf is NaN, as ATen's x - max gives it (inf - inf); the reduction's
    # sum counts the +inf as 1 for logsumexp's sake (codegen.update)
    o = lw.reduce("softmax", x, ["m", "s"])
    nan = lw.lit(math.nan)
    if "log" in n.opname:
        # (x - m) - log(s), as ATen orders it: x - (m + log(s)) rounds m + log(s) first and
        # loses log(s)'s low bits where m is large (logits of hundreds: an error of ulp(m))
        ls = lw.emit(f"({o['m']} == SC_INF ? {nan} : sc_log({o['s']}))", [o["m"], o["s"]], "row")
        lw.env[n.name] = lw.emit(f"(({x} - {o['m']}) - {ls})", [x, o["m"], ls], "full")
    else:
        inv = lw.emit(f"({o['m']} == SC_INF ? {nan} : {lw.lit(1)} / {o['s']})",
                      [o["m"], o["s"]], "row")
        lw.env[n.name] = lw.emit(f"(sc_exp({x} - {o['m']}) * {inv})", [x, o["m"], inv], "full")


def _rms_norm(lw: Lowering, n: Node, x: str) -> None:
    eps = n.args[3] if len(n.args) > 3 else n.kwargs.get("eps")
    if eps is None:
        eps = _EPS[lw.graph.node(node_ref(n.args[0])).dtype]
    sq = lw.emit(f"({x} * {x})", [x], "full")
    o = lw.reduce("sum", sq, ["sum"])
    rstd = lw.emit(f"sc_rsqrt({o['sum']} / {lw.lit(lw.rowlen)} + {lw.lit(eps)})", [o["sum"]],
                   "row")
    w = lw.tensor_arg(node_ref(n.args[2]), lw.S) if len(n.args) > 2 and node_ref(n.args[2]) \
        else None
    e = _scale_shift(f"({x} * {rstd})", w, None)
    lw.env[n.name] = lw.emit(e, vars_in(e), "full")


def _norm_params(lw: Lowering, n: Node) -> tuple[str | None, str | None, float, float | None]:
    """(weight, bias, eps, momentum) of a mean/variance normalisation."""
    name, a = n.opname, n.args
    if name == "layer_norm":
        w = lw.tensor_arg(node_ref(a[2]), lw.S) if len(a) > 2 and node_ref(a[2]) else None
        b = lw.tensor_arg(node_ref(a[3]), lw.S) if len(a) > 3 and node_ref(a[3]) else None
        return w, b, a[4] if len(a) > 4 else 1e-5, None
    if name == "group_norm":
        w = lw.param(a[2]) if len(a) > 2 else None
        b = lw.param(a[3]) if len(a) > 3 else None
        return w, b, a[4] if len(a) > 4 else 1e-5, None
    if name == "instance_norm":
        if node_ref(a[3]) or node_ref(a[4]):
            raise Unsupported(f"{n.name}: instance norm with running statistics")
        if not a[5]:
            raise Unsupported(f"{n.name}: instance norm without input statistics")
        return lw.param(a[1]), lw.param(a[2]), a[7], None
    if name == "batch_norm":
        w, b = lw.param(a[1]), lw.param(a[2])
        if a[6] is None:
            raise Unsupported(f"{n.name}: cumulative-average batch norm")
        return w, b, a[7], a[6]
    raise Unsupported(f"{n.name}: {name}")


def _mean_var_norm(lw: Lowering, n: Node, x: str) -> None:
    w, b, eps, mom = _norm_params(lw, n)
    o = lw.reduce("welford", x, ["mean", "m2"])
    rstd = lw.emit(f"sc_rsqrt({o['m2']} / {lw.lit(lw.rowlen)} + {lw.lit(eps)})", [o["m2"]],
                   "row")
    e = _scale_shift(f"(({x} - {o['mean']}) * {rstd})", w, b)
    lw.env[n.name] = lw.emit(e, vars_in(e), "full")
    if n.opname == "batch_norm":
        if lw.rowlen < 2:
            raise Unsupported(f"{n.name}: batch norm over one value")
        _update_running_stats(lw, n, o, mom)


def _update_running_stats(lw: Lowering, n: Node, o: dict, mom: float) -> None:
    """Training batch norm: running mean/var <- (1 - momentum) * old + momentum * batch."""
    L = lw.lit
    for argi, stat in ((3, "mean"), (4, "var")):
        ref = node_ref(n.args[argi])
        if ref is None:
            continue
        view, strides = [1] * lw.rank, [0] * lw.rank
        view[1], strides[1] = lw.S[1], 1
        old = lw.load(ref, view, strides)
        idx = next(s.operand for s in lw.stmts if s.var == old)
        lw.operands[idx].role = "inout"
        lw.operands[idx].name = f"io{idx}"
        val = o["mean"] if stat == "mean" else f"({o['m2']} / {L(lw.rowlen - 1)})"
        upd = lw.emit(f"(({L(1 - mom)}) * {old} + {L(mom)} * {val})", vars_in(f"{old} {val}"),
                      "row")
        lw.stmts.append(Stmt(op="store", var=upd, operand=idx, level="row", deps=[upd]))
