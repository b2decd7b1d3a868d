"""Graph rewrites that expose fusion around the vendor library, applied before planning.

``rewrite(graph)`` returns a new Graph (the input is never changed) where:

- losses and norms are written as the ops the kernels compute (``decompose.py``);
- a convolution/linear whose every user is fusable loses its bias: the library runs without it
  and a broadcast ``add`` (the bias viewed as ``[C, 1, 1]``) joins the epilogue kernel, so the
  library output is read once instead of once by cuDNN's separate bias pass and once by us;
- ``avg_pool2d(x, k)`` (stride k, no padding, sizes divisible) followed only by a spatial
  ``mean`` becomes that mean of ``x`` (equal disjoint windows: same value);
- ``adaptive_avg_pool2d(x, [1, 1])`` becomes ``mean(x, [2, 3], keepdim=True)`` (and the 3d
  one over ``[1, 1, 1]`` a mean over its three spatial dims): a row reduction; so does a
  global ``adaptive_max_pool2d``/``3d`` whose indices no one reads, as ``amax``;
- ``avg_pool(conv(x))`` where the convolution is per pixel (kernel 1 in every spatial dim,
  stride 1, no padding; any groups and bias) and the pool pads nothing becomes
  ``conv(avg_pool(x))`` (``_pool_before_pointwise_conv``): a linear map of each pixel's
  channels commutes with averaging pixels (a bias averages to itself), so the convolution
  runs on the pooled pixels (a 2x2 pool: a quarter of its FLOPs and of its output) and the
  pool joins whatever pointwise chain made ``x``; where the pooled ``x`` has no more values
  than the convolution's output (else the pool would read more than it saves);
- ``max_pool2d``/``avg_pool2d`` with stride == kernel, no padding and divisible sizes, fed by a
  pointwise chain from a library op, becomes ``amax``/``mean`` over dims ``[3, 5]`` of the
  chain lifted to ``[N, C, OH, kh, OW, kw]`` (a free view of the library output), so one row
  kernel applies bias/batch-norm/activation and pools, writing only the pooled tensor.

- a GEMM whose output is only summed (or averaged) over its output features, through scalar
  ``mul``/``div`` and bias or constant ``add``/``sub``, becomes a GEMM against the summed (or
  averaged) weights: ``sum_j (x @ W_j + b_j) * c = (x @ sum_j W_j + sum_j b_j) * c``
  (``_sum_of_gemm``), one column instead of N, and the sum over a dim of size 1 left in place
  (it keeps ``keepdim``);

- a matrix product with a diagonal matrix made by ``diag(v)`` becomes a broadcast ``mul``:
  ``diag(v) @ B`` is ``v[:, None] * B`` and ``B @ diag(v)`` is ``B * v`` (``_diag_matmul``),
  the N x N matrix never made and the product's zero terms never summed (exact: each sum is
  one product plus zeros);

- ``flip(cumsum(flip(x, [d]), d), [d])`` (a reversed scan) becomes one ``cumsum`` of ``x``
  with ``reverse=True`` (the scan kernel walks the row backwards; ``program.py`` writes the
  flips back when the scan stays in PyTorch).

- a sum, mean, max, min or vector norm over a long suffix of dims with few rows (on the GPU
  fewer rows than the H200 has SMs: one block per row would leave most of them idle; on the
  CPU fewer than a many-core CPU has cores), or of a whole tensor past what one kernel reduces
  whole (a loss's mean), is split in two (``_split_long_rows``): the row cut into parts
  reduced side by side (rows x parts blocks), then the parts reduced; a sum of partial sums,
  a mean of means of equal parts, a p-norm of the parts' p-norms (a Frobenius norm of a whole
  tensor is one row). The pointwise chain that only feeds it is computed in the parts' shape,
  in the same kernel (``_chain_as``). A layer norm over such rows on the GPU the same way
  (``_split_long_norm``): each part's mean and variance side by side (one ``var_mean``
  pass), the row's mean the mean of theirs and its variance the mean of theirs plus the
  variance of their means (equal parts), then one pointwise pass over ``x``;

- a sum, mean, amax, amin, prod or logsumexp over dims that are all of size 1 (a value an
  earlier reduction kept with ``keepdim=True``; a whole-tensor sum, mean, prod, amax or amin
  of a tensor of one element, as a batch of one's loss), and the values of a max or min over such a
  dim whose indices no one reads, are its input, as ``x + 0.0`` or ``x * 1.0`` (the same
  bits, -0.0 included; a new tensor, not a view), viewed without those dims where ``keepdim``
  is off (``_size_one_reductions``): no second pass over the row values, and the ops after it
  fuse into the first reduction's kernel; a softmax over such a dim is ``exp(x - x)`` and a
  log-softmax ``x - x`` (1 and 0, NaN where ``x`` is not finite, as ATen gives);

- a view that only merges or splits neighbouring dims of a contiguous tensor moves out of a
  pointwise chain's way (``regroup.py``): the chain before it is computed in the view's
  shape, or the chain after it in the shape viewed, so that a softmax over ``x.view(b, c,
  -1)`` fuses with what comes before and after it;

- ops whose results reach no output are dropped (``_drop_dead``): a forward that computes a
  value and never returns it (a model kept from an earlier version, a branch of a debugging
  aid) costs eager its time and the candidate nothing, as under Inductor. Ops that write in
  place or draw random numbers stay, with what they read: they change state a later forward
  or a later draw sees.

Every rewrite is exact up to float summation order. Deterministic, so the Planner and the Coder
see the same node names.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from ... import aten
from ...graph import Graph, Node
from .decompose import Builder, arg, decompose, ref, replace_refs, unique_name
from .regroup import chain_of, recast, views_through_pointwise
from .expand import node_role
from .helpers import DROPOUTS, contiguous_strides, dropout_of_zero, node_ref
from .lower import MAX_FULL_REDUCTION

_BIAS_OPS = ("conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "linear")


def _pair(v: Any, default: list[int] | None = None) -> list[int] | None:
    if v is None or v == []:
        return default
    if isinstance(v, int):
        return [v, v]
    if isinstance(v, list) and len(v) == 1:
        return [int(v[0])] * 2
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return [int(x) for x in v]
    return None


def _use_instead(g: Graph, old: str, new: str, but: Node | None = None) -> None:
    """Every read of ``old`` (the graph's outputs too) reads ``new``, but ``but``'s."""
    for m in g.nodes:
        if m is not but:
            m.args = replace_refs(m.args, old, new)
            m.kwargs = replace_refs(m.kwargs, old, new)
    g.outputs = replace_refs(g.outputs, old, new)


def _view(name: str, src: Node, shape: list[int]) -> Node:
    return Node(name=name, op="call_function", target="aten.view.default",
                op_class=aten.category("aten.view.default"), args=[{"node": src.name}, list(shape)],
                shape=list(shape), dtype=src.dtype, stride=contiguous_strides(list(shape)),
                lowers_to=["aten.view.default"])


def _insert_after(graph: Graph, anchor: str, new: Node) -> None:
    i = next(k for k, n in enumerate(graph.nodes) if n.name == anchor)
    graph.nodes.insert(i + 1, new)


def _fusable(n: Node, graph: Graph) -> bool:
    return not aten.is_library(n.target) and node_role(n) not in (None, "view")


def rewrite(graph: Graph) -> Graph:
    """The rewritten copy (see module docstring); ``graph`` itself is left unchanged."""
    if graph.capture == "none":
        return graph
    g = copy.deepcopy(graph)
    try:
        decompose(g)
        _fold_avgpool_mean(g)
        _adaptive_avg_to_mean(g)
        _adaptive_max_to_amax(g)
        _pool_before_pointwise_conv(g)
        _sum_of_gemm(g)
        _size_one_reductions(g)   # after the GEMM's sum, which leaves one over a dim of size 1
        _diag_matmul(g)
        _split_bias(g)
        _pool_epilogue(g)
        views_through_pointwise(g)
        _reverse_scans(g)
        _split_long_rows(g)
        _split_long_norm(g)
        _drop_dead(g)
    except (KeyError, TypeError, ValueError, IndexError):
        return graph
    return g


# -- reductions over dims of size 1 --------------------------------------------------------------
_IDENTITY_OVER_ONE = ("sum", "mean", "amax", "amin", "prod", "logsumexp")


def _size_one_reductions(g: Graph) -> None:
    users = g.users()
    for n in list(g.calls()):
        if n.opname in _SOFTMAX_OVER_ONE:
            _softmax_over_one(g, n)
            continue
        tuple_op = n.opname in ("max", "min") and n.target.endswith(".dim")
        # over every dim: sum/mean/prod's .default, amax/amin with no dims (a loss's mean
        # of a batch of one, the sum of a value a keepdim reduction left [1, 1])
        whole = (n.opname in ("sum", "mean", "prod") and n.target.endswith(".default")) or (
            n.opname in ("amax", "amin") and (len(n.args) < 2 or n.args[1] in ([], None)))
        if (n.opname not in _IDENTITY_OVER_ONE and not tuple_op) \
                or (len(n.args) < 2 and not whole) or n.kwargs.get("dtype") is not None:
            continue
        src = node_ref(n.args[0])
        x = g.node(src) if src is not None else None
        if x is None or x.shape is None or not x.shape or x.dtype not in ("float32", "float64") \
                or (x.dtype != n.dtype and not tuple_op):   # a tuple's dtype: its items'
            continue
        rank = len(x.shape)
        dims = list(range(rank)) if whole else (
            n.args[1] if isinstance(n.args[1], list) else [n.args[1]])
        if not dims or not all(isinstance(d, int) for d in dims):
            continue
        if any(not -rank <= d < rank or x.shape[d % rank] != 1 for d in dims):
            continue
        if not tuple_op:
            if n.shape is not None:
                _become_input(g, n, x)
            continue
        # max / min over the dim: (values, indices); the values are the input where no one
        # reads the indices (all zeros), and the op is left to _drop_dead
        items = [g.node(u) for u in users.get(n.name, []) if u != "output"]
        if "output" in users.get(n.name, []) or any(
                i.target != "getitem" or (i.args[1] != 0 and users.get(i.name)) or
                i.shape is None for i in items):
            continue
        for item in items:
            if item.args[1] == 0:
                _become_input(g, item, x)


# a softmax over one element is 1 and a log-softmax 0, except where the element is not
# finite: ATen's x - max(x) is then NaN, and so is its result
_SOFTMAX_OVER_ONE = ("softmax", "_softmax", "log_softmax", "_log_softmax")


def _softmax_over_one(g: Graph, n: Node) -> None:
    """A (log-)softmax over a dim of size 1 (a row an earlier reduction kept with
    ``keepdim=True``) as the pointwise ``exp(x - x)`` (``x - x`` for the log): the same bits,
    NaN included, and a reduction less, so the ops around it fuse with the one before."""
    src = node_ref(n.args[0]) if n.args else None
    x = g.node(src) if src is not None else None
    if x is None or not x.shape or x.dtype not in ("float32", "float64") or x.dtype != n.dtype \
            or n.shape != x.shape or len(n.args) < 2 or not isinstance(n.args[1], int):
        return
    if n.kwargs.get("dtype") is not None or (n.opname.startswith("_") and len(n.args) > 2
                                             and n.args[2]):   # half_to_float
        return
    rank = len(x.shape)
    if not -rank <= n.args[1] < rank or x.shape[n.args[1] % rank] != 1:
        return
    b = Builder(g, n)
    if n.opname.endswith("log_softmax"):
        b.become("aten.sub.Tensor", [ref(x), ref(x)])
        return
    zero = b.add("aten.sub.Tensor", [ref(x), ref(x)], list(x.shape), x.dtype)
    b.become("aten.exp.default", [ref(zero)])


# sum, mean and logsumexp of one element add it to 0 (-0.0 comes back +0.0); amax, amin and a
# max's or min's values return it as it is, and prod multiplies it by 1
_PLUS_ZERO = ("sum", "mean", "logsumexp")


def _become_input(g: Graph, n: Node, x: Node) -> None:
    """``n`` (``x``'s elements in ``n.shape``: a reduction over size-1 dims) turned into the
    pointwise op of ``x`` that gives the same bits (``x + 0.0`` or ``x * 1.0``): a new
    tensor, never a view of ``x``, so a write in place into either, or an output that is
    ``n``, is what it was; and it joins the kernel before it. Where the reduction dropped
    its dims, a view of that op's result drops them."""
    target, scalar = (("aten.add.Tensor", 0.0) if n.opname in _PLUS_ZERO
                      else ("aten.mul.Tensor", 1.0))
    Builder(g, n).become(target, [ref(x), scalar])
    n.dtype = x.dtype
    shape = list(n.shape or [])
    n.shape, n.stride = list(x.shape or []), contiguous_strides(list(x.shape or []))
    if shape == n.shape:
        return
    view = _view(unique_name(g, f"{n.name}_dims"), n, shape)
    _insert_after(g, n.name, view)
    _use_instead(g, n.name, view.name, but=view)


# -- diagonal matrices --------------------------------------------------------------------------
# views that leave a diagonal matrix what it was (its transpose is itself)
_SAME_DIAGONAL = ("alias", "t", "transpose", "permute", "numpy_T", "mT", "adjoint", "clone",
                  "contiguous")


def _diagonal_of(g: Graph, r: Any) -> Node | None:
    """The vector ``v`` where ``r`` names ``diag(v)`` (through views that keep it); else None."""
    name = node_ref(r)
    while name is not None:
        n = g.node(name)
        if n.op != "call_function":
            return None
        if n.opname == "diag":
            v = g.node(node_ref(n.args[0]))
            return v if v.shape is not None and len(v.shape) == 1 and not arg(
                n, 1, "diagonal", 0) else None
        if n.opname not in _SAME_DIAGONAL or n.shape is None or len(n.shape) != 2:
            return None
        name = node_ref(n.args[0])
    return None


def _diag_matmul(g: Graph) -> None:
    for n in list(g.calls()):
        if n.opname not in ("mm", "matmul") or n.shape is None or n.dtype != "float32" \
                or len(n.args) < 2:
            continue
        for side in (0, 1):
            v = _diagonal_of(g, n.args[side])
            other = node_ref(n.args[1 - side])
            if v is None or other is None or v.dtype != n.dtype:
                continue
            o = g.node(other)
            if o.shape is None or o.dtype != n.dtype or list(o.shape) != list(n.shape):
                continue   # a broadcast batch of the other operand: left as it is
            b = Builder(g, n)
            if side == 0 and len(o.shape) >= 2:   # v[:, None] * B: v scales B's rows
                rows = [o.shape[-2], 1]
                col = b.add("aten.view.default", [ref(v), rows], rows, n.dtype,
                            name=f"{n.name}_rows")
                b.become("aten.mul.Tensor", [ref(col), {"node": other}])
            else:                                 # B * v: v scales B's columns
                b.become("aten.mul.Tensor", [{"node": other}, ref(v)] if side else
                         [ref(v), {"node": other}])
            break


# -- bias ---------------------------------------------------------------------------------------
def _split_bias(g: Graph) -> None:
    for n in list(g.calls()):
        if n.opname not in _BIAS_OPS or not aten.is_library(n.target):
            continue
        b = node_ref(n.args[2]) if len(n.args) > 2 else node_ref(n.kwargs.get("bias"))
        if b is None or n.shape is None or n.dtype != "float32":
            continue
        users = g.users()[n.name]
        if not users or "output" in users or not all(_fusable(g.node(u), g) for u in users):
            continue
        bn = g.node(b)
        if bn.shape is None or len(bn.shape) != 1:
            continue
        if n.opname == "linear":
            bref = bn
        else:
            if len(n.shape) < 3 or n.shape[1] != bn.shape[0]:
                continue
            bref = _view(unique_name(g, f"{n.name}_bias_view"), bn, [bn.shape[0]]
                         + [1] * (len(n.shape) - 2))
        add = Node(name=unique_name(g, f"{n.name}_bias"), op="call_function",
                   target="aten.add.Tensor", op_class=aten.category("aten.add.Tensor"),
                   args=[{"node": n.name}, {"node": bref.name}], shape=list(n.shape),
                   dtype=n.dtype, stride=contiguous_strides(list(n.shape)),
                   lowers_to=["aten.add.Tensor"])
        for u in users:
            un = g.node(u)
            un.args = replace_refs(un.args, n.name, add.name)
            un.kwargs = replace_refs(un.kwargs, n.name, add.name)
        if len(n.args) > 2:
            n.args[2] = None
        else:
            n.kwargs["bias"] = None
        if n.opname == "linear":
            n.lowers_to = ["aten.mm.default" if t == "aten.addmm.default" else t
                           for t in n.lowers_to]
        _insert_after(g, n.name, add)
        if bref is not bn:
            _insert_after(g, n.name, bref)


# -- pooling ------------------------------------------------------------------------------------
def _pool_geometry(n: Node, g: Graph) -> tuple[list[int], str] | None:
    """(kernel, "max"|"avg") when the pool is disjoint windows tiling its input exactly."""
    name = n.opname
    if name not in ("max_pool2d", "avg_pool2d"):
        return None
    x = g.node(node_ref(n.args[0]))
    if x.shape is None or len(x.shape) != 4 or x.dtype != "float32":
        return None
    a = list(n.args) + [None] * 8
    k = _pair(a[1])
    s = _pair(a[2], k)
    pad = _pair(a[3], [0, 0])
    if k is None or s != k or pad != [0, 0]:
        return None
    if name == "max_pool2d":
        if _pair(a[4], [1, 1]) != [1, 1] or a[5] not in (None, False):
            return None
    elif a[4] not in (None, False) or a[6] is not None:
        return None
    if n.kwargs:
        return None
    H, W = x.shape[2], x.shape[3]
    if H % k[0] or W % k[1]:
        return None
    return k, ("max" if name == "max_pool2d" else "avg")


def _fold_avgpool_mean(g: Graph) -> None:
    users = g.users()
    for n in list(g.calls()):
        geo = _pool_geometry(n, g)
        if geo is None or geo[1] != "avg":
            continue
        us = users[n.name]
        if len(us) != 1 or us[0] == "output":
            continue
        m = g.node(us[0])
        if m.target != "aten.mean.dim" or node_ref(m.args[0]) != n.name:
            continue
        dims = m.args[1] if isinstance(m.args[1], list) else [m.args[1]]
        if sorted(int(d) % 4 for d in dims) != [2, 3]:
            continue
        m.args = [n.args[0]] + list(m.args[1:])
        m.lowers_to = list(dict.fromkeys(m.lowers_to + [n.target] + n.lowers_to))
        g.nodes.remove(n)
        users = g.users()


def _adaptive_avg_to_mean(g: Graph) -> None:
    for n in list(g.calls()):
        nd = {"adaptive_avg_pool2d": 2, "adaptive_avg_pool3d": 3}.get(n.opname)
        if nd is None or list(n.args[1]) != [1] * nd:
            continue
        x = g.node(node_ref(n.args[0]))
        if x.shape is None or len(x.shape) != nd + 2:
            continue
        n.lowers_to = list(dict.fromkeys(["aten.mean.dim", n.target] + n.lowers_to))
        n.target = "aten.mean.dim"
        n.op_class = aten.category(n.target)
        n.args = [n.args[0], [-1 - d for d in range(nd)], True]


def _adaptive_max_to_amax(g: Graph) -> None:
    users = g.users()
    outputs = set(g.output_names())
    for n in list(g.calls()):
        nd = {"adaptive_max_pool2d": 2, "adaptive_max_pool3d": 3}.get(n.opname)
        if nd is None or list(n.args[1]) != [1] * nd or n.name in outputs:
            continue
        x = g.node(node_ref(n.args[0]))
        items = [g.node(u) for u in users.get(n.name, []) if u != "output"]
        if x.shape is None or len(x.shape) != nd + 2 or not items or any(
                u.target != "getitem" or (u.args[1] != 0 and users.get(u.name)) for u in items) \
                or len(items) != len(users.get(n.name, [])):
            continue   # the indices are read: the library's
        n.lowers_to = list(dict.fromkeys(["aten.amax.default", n.target] + n.lowers_to))
        n.target, n.op_class = "aten.amax.default", aten.category("aten.amax.default")
        n.args, n.kwargs = [n.args[0], [-1 - d for d in range(nd)], True], {}
        n.shape = x.shape[:2] + [1] * nd
        n.dtype, n.stride = x.dtype, contiguous_strides(n.shape)
        for item in items:   # the values item is the amax itself; the indices go unread
            _use_instead(g, item.name, n.name)
            g.nodes.remove(item)


_POINTWISE_CONV = {"avg_pool1d": "conv1d", "avg_pool2d": "conv2d", "avg_pool3d": "conv3d"}


def _per_pixel(c: Node, g: Graph, nd: int) -> bool:
    """A convolution of ``nd`` spatial dims that maps each pixel's channels alone."""
    a = list(c.args) + [None] * 7
    w = g.node(node_ref(a[1]))
    if c.kwargs or w.shape is None or len(w.shape) != nd + 2 or any(k != 1 for k in w.shape[2:]):
        return False
    stride, padding = a[3], a[4]
    return (stride is None or all(v == 1 for v in ([stride] if isinstance(stride, int)
                                                     else stride))) \
        and (padding in (None, "valid") or (not isinstance(padding, str) and all(
            v == 0 for v in ([padding] if isinstance(padding, int) else padding))))


def _pool_before_pointwise_conv(g: Graph) -> None:
    outputs = set(g.output_names())
    for p in list(g.calls()):
        conv = _POINTWISE_CONV.get(p.opname)
        if conv is None or p.kwargs or p.shape is None:
            continue
        nd = len(p.shape) - 2
        a = list(p.args) + [None] * 7
        pad = a[3]
        if (pad not in (None, 0) and any(v != 0 for v in ([pad] if isinstance(pad, int) else pad))) \
                or a[4] not in (None, False) or (nd > 1 and a[6] is not None):
            continue   # padding, ceil_mode and a divisor: not handled
        c = g.node(node_ref(p.args[0]))
        if c.opname != conv or c.name in outputs or g.users()[c.name] != [p.name] \
                or c.shape is None or c.dtype != "float32" or not _per_pixel(c, g, nd):
            continue
        x = g.node(node_ref(c.args[0]))
        ratio = math.prod(p.shape) / max(1, math.prod(c.shape))   # pooled pixels per pixel
        if x.shape is None or ratio * x.shape[1] > c.shape[1]:
            continue   # the pool would move more bytes on x's channels than it saves
        pooled_out = list(p.shape)
        _use_instead(g, p.name, c.name, but=c)
        p.args = [{"node": x.name}] + list(p.args[1:])
        p.shape = [x.shape[0], x.shape[1]] + pooled_out[2:]
        p.stride = contiguous_strides(p.shape)
        c.args = [{"node": p.name}] + list(c.args[1:])
        c.shape, c.stride = pooled_out, contiguous_strides(pooled_out)
        for n, by in ((c, ratio), (p, x.shape[1] / c.shape[1])):   # costs as they now are
            n.flops, n.bytes = int(n.flops * by), int(n.bytes * by)
            n.time_us = None if n.time_us is None else n.time_us * by
        g.nodes.remove(p)
        g.nodes.insert(g.nodes.index(c), p)


def _pool_epilogue(g: Graph) -> None:
    for p in list(g.calls()):
        geo = _pool_geometry(p, g)
        if geo is None:
            continue
        (kh, kw), kind = geo
        chain = _chain_to_library(g, node_ref(p.args[0]))
        if chain is None:
            continue
        lib, members = chain
        N, C, H, W = g.node(node_ref(p.args[0])).shape
        six = [N, C, H // kh, kh, W // kw, kw]
        v6 = _view(unique_name(g, f"{lib.name}_pool_view"), lib, six)
        first = g.node(members[0])
        first.args = replace_refs(first.args, lib.name, v6.name)
        first.kwargs = replace_refs(first.kwargs, lib.name, v6.name)
        extra: list[Node] = []
        for m in members:
            mn = g.node(m)
            mn.shape, mn.stride = list(six), contiguous_strides(six)
            for r in mn.inputs():
                if r in members or r == v6.name:
                    continue
                rn = g.node(r)
                if rn.shape is None:
                    continue
                if mn.opname == "batch_norm" and len(rn.shape) == 1:
                    continue   # per-channel parameters: read along dim 1 whatever the rank
                pad4 = [1] * (4 - len(rn.shape)) + list(rn.shape)
                lifted = pad4[:2] + [1, 1, 1, 1]
                vv = _view(unique_name(g, f"{r}_pool_view"), rn, lifted)
                extra.append(vv)
                mn.args = replace_refs(mn.args, r, vv.name)
                mn.kwargs = replace_refs(mn.kwargs, r, vv.name)
        p.lowers_to = list(dict.fromkeys(
            (["aten.amax.default"] if kind == "max" else ["aten.mean.dim"]) + [p.target]
            + p.lowers_to))
        if kind == "max":
            p.target, p.args, p.kwargs = "aten.amax.default", [p.args[0], [3, 5], False], {}
        else:
            p.target, p.args, p.kwargs = "aten.mean.dim", [p.args[0], [3, 5], False], {}
        _insert_after(g, lib.name, v6)
        for vv in extra:
            _insert_after(g, node_ref(vv.args[0]), vv)


def _chain_to_library(g: Graph, start: str | None) -> tuple[Node, list[str]] | None:
    """(library node, pointwise chain from it to ``start`` in order) when each link has one
    user and the other tensor operands vary only along the channel dim (or are batch-norm
    parameters)."""
    users = g.users()
    members: list[str] = []
    cur = start
    while cur is not None:
        n = g.node(cur)
        if n.op == "call_function" and aten.is_library(n.target):
            if len(users[cur]) != 1 or not members or n.shape is None or len(n.shape) != 4:
                return None
            return n, members[::-1]
        if n.op != "call_function" or node_role(n) != "pointwise" or len(users[cur]) != 1:
            return None
        if n.shape is None or len(n.shape) != 4:
            return None
        members.append(cur)
        nxt = None
        for r in n.inputs():
            rn = g.node(r)
            if rn.shape is not None and list(rn.shape) == list(n.shape):
                if nxt is not None:
                    return None
                nxt = r
                continue
            if rn.shape is None:
                continue
            if n.opname == "batch_norm" and len(rn.shape) == 1:
                continue
            pad4 = [1] * (4 - len(rn.shape)) + list(rn.shape)
            if len(rn.shape) > 4 or pad4[0] != 1 or pad4[2:] != [1, 1]:
                return None
        cur = nxt
    return None



# -- scans --------------------------------------------------------------------------------------
def _flip_dim(n: Node, g: Graph) -> int | None:
    """The one dim a ``flip`` node reverses (non-negative), else None."""
    if n.target != "aten.flip.default" or n.shape is None:
        return None
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dims")
    if not isinstance(dims, list) or len(dims) != 1:
        return None
    return int(dims[0]) % max(1, len(n.shape))


def _reverse_scans(g: Graph) -> None:
    for c in list(g.calls()):
        if c.opname not in ("cumsum", "cumprod") or c.kwargs or len(c.args) != 2 \
                or c.shape is None:
            continue
        users = g.users()
        inner = g.node(node_ref(c.args[0]))
        d = int(c.args[1]) % max(1, len(c.shape))
        outs = users.get(c.name, [])
        if _flip_dim(inner, g) != d or users.get(inner.name) != [c.name] or len(outs) != 1 \
                or outs[0] == "output" or _flip_dim(g.node(outs[0]), g) != d:
            continue
        outer = g.node(outs[0])
        c.args = [inner.args[0], d]
        c.kwargs = {"reverse": True}
        c.lowers_to = list(dict.fromkeys(c.lowers_to + ["aten.flip.default"]))
        for u in users.get(outer.name, []):
            if u == "output":
                g.outputs = replace_refs(g.outputs, outer.name, c.name)
                continue
            un = g.node(u)
            un.args = replace_refs(un.args, outer.name, c.name)
            un.kwargs = replace_refs(un.kwargs, outer.name, c.name)
        g.nodes.remove(inner)
        g.nodes.remove(outer)


# -- a GEMM summed over its output features ---------------------------------------------------
_SCALE_OPS = ("mul", "div")          # by a number: commutes with the sum
_SHIFT_OPS = ("add", "sub")          # of a number or a vector along the summed dim
_GEMMS = ("matmul", "mm", "linear")
_REDUCES = ("aten.sum.dim_IntList", "aten.mean.dim")   # a mean: the weights' mean, likewise
# suffixes of the nodes it adds (summed weights, bias, shift), which the plan names
SUM_OF_GEMM_NODES = ("_wsum", "_bsum", "_vsum")


def _reduce_node(g: Graph, name: str, src: str, dims: list[int], shape: list[int],
                 dtype: str | None, target: str = "aten.sum.dim_IntList") -> Node:
    return Node(name=unique_name(g, name), op="call_function", target=target,
                op_class=aten.category(target), args=[{"node": src}, dims, True],
                shape=list(shape), dtype=dtype, stride=contiguous_strides(list(shape)),
                lowers_to=[target])


def _sum_of_gemm(g: Graph) -> None:
    """``sum(chain(gemm(x, W)), dim=-1)`` -> ``sum(chain'(gemm(x, sum_j W_j)), dim=-1)`` (module
    docstring). Exact in real arithmetic, and no less exact in fp32: the reference rounds each
    of the N products' sums and then sums N of them; here the weights are summed first. Only
    where every node from the GEMM to the sum has one user, so nothing else reads the full
    product."""
    users = g.users()
    for s in list(g.calls()):
        if s.target not in _REDUCES or s.shape is None or len(s.args) < 2:
            continue
        src = g.node(node_ref(s.args[0]) or "")
        if src.shape is None or len(src.shape) < 2 or src.dtype not in ("float32", "float64"):
            continue
        dims = s.args[1] if isinstance(s.args[1], list) else [s.args[1]]
        if len(dims) != 1 or not isinstance(dims[0], int) \
                or dims[0] % len(src.shape) != len(src.shape) - 1:
            continue
        n_out = src.shape[-1]
        chain: list[Node] = []
        cur = src
        while cur.opname in _SCALE_OPS + _SHIFT_OPS and len(users.get(cur.name, [])) == 1:
            chain.append(cur)
            cur = g.node(node_ref(cur.args[0]) or "")
        if cur.opname not in _GEMMS or not aten.is_library(cur.target) \
                or len(users.get(cur.name, [])) != 1 or cur.shape is None \
                or cur.shape[-1] != n_out or cur.kwargs:
            continue
        if not all(_sum_commutes(c, g, n_out, src.dtype) for c in chain):
            continue
        _rewrite_sum_of_gemm(g, s, cur, list(reversed(chain)), s.target)
        users = g.users()


def _sum_commutes(n: Node, g: Graph, n_out: int, dtype: str | None) -> bool:
    """A chain node the sum passes through: a number scaling it, or a number or [N] vector
    of the chain's dtype added (the first argument is the chain; no ``alpha``): a vector of
    another dtype would be summed in its own (fp16 overflowing, an int mean truncated)."""
    if n.kwargs or len(n.args) != 2:
        return False
    other = n.args[1]
    if n.opname in _SCALE_OPS:
        return isinstance(other, (int, float)) and not isinstance(other, bool)
    if isinstance(other, (int, float)) and not isinstance(other, bool):
        return True
    ref = node_ref(other)
    return ref is not None and g.node(ref).shape in ([n_out], [1, n_out]) \
        and g.node(ref).dtype == dtype


def _rewrite_sum_of_gemm(g: Graph, s: Node, gemm: Node, chain: list[Node],
                         reduce: str) -> None:
    if gemm.shape is None:
        return
    n_out = gemm.shape[-1]
    mean = reduce == "aten.mean.dim"
    out_shape = list(gemm.shape[:-1]) + [1]
    if gemm.opname == "linear":      # linear(x, W [N, K], b [N]): sum W's rows, b's elements
        w = g.node(node_ref(gemm.args[1]) or "")
        if w.shape is None or len(w.shape) != 2:
            return
        ws = _reduce_node(g, f"{gemm.name}_wsum", w.name, [0], [1, w.shape[1]], w.dtype,
                          reduce)
        new_nodes = [ws]
        gemm.args[1] = {"node": ws.name}
        bias = node_ref(gemm.args[2]) if len(gemm.args) > 2 else None
        if bias is not None:
            bs = _reduce_node(g, f"{gemm.name}_bsum", bias, [0], [1], g.node(bias).dtype,
                              reduce)
            new_nodes.append(bs)
            gemm.args[2] = {"node": bs.name}
    else:                             # matmul(x, B [K, N]): sum B's columns
        rhs = g.node(node_ref(gemm.args[1]) or "")
        if rhs.shape is None or len(rhs.shape) != 2:
            return
        ws = _reduce_node(g, f"{gemm.name}_wsum", rhs.name, [1], [rhs.shape[0], 1], rhs.dtype,
                          reduce)
        new_nodes = [ws]
        gemm.args[1] = {"node": ws.name}
    gemm.shape, gemm.stride = out_shape, contiguous_strides(out_shape)
    gemm.flops = gemm.flops // max(1, n_out)
    for c in chain:
        other = c.args[1]
        if c.opname in _SHIFT_OPS:
            if isinstance(other, (int, float)):
                # sum_j (y_j + c) = sum_j y_j + N c; the mean of y_j + c is mean(y) + c
                c.args[1] = other if mean else other * n_out
            else:
                v = node_ref(other)
                vs = _reduce_node(g, f"{c.name}_vsum", v, [-1], [1] * len(g.node(v).shape),
                                  g.node(v).dtype, reduce)
                # before the node that reads it: the vector may be computed after the GEMM
                g.nodes.insert(next(k for k, n in enumerate(g.nodes) if n.name == c.name), vs)
                c.args[1] = {"node": vs.name}
        c.shape, c.stride = list(out_shape), contiguous_strides(out_shape)
    for nn_ in reversed(new_nodes):
        i = next(k for k, n in enumerate(g.nodes) if n.name == gemm.name)
        g.nodes.insert(i, nn_)
    # the sum (or mean) stays, over a dim of size 1 now: it keeps its keepdim and its users
    s.flops = 0


# -- long rows ----------------------------------------------------------------------------------
SPLIT_ROWS_BELOW = 132       # rows: the H200's SM count; with fewer, one block per row idles SMs
SPLIT_LEAST_LEN = 1 << 18    # elements per row from which a row is split
SPLIT_PART_LEAST = 4096      # elements in a part, at least (a block's worth of float4 loads)
SPLIT_BLOCKS_MOST = 8192     # rows x parts, at most: the second reduction stays small
CPU_SPLIT_ROWS_BELOW = 16    # rows: with fewer, a core per row leaves a many-core CPU idle
_SPLITTABLE = {"sum": "aten.sum.dim_IntList", "mean": "aten.mean.dim",
               "amax": "aten.amax.default", "amin": "aten.amin.default",
               "linalg_vector_norm": "aten.linalg_vector_norm.default"}


def _norm_order(n: Node) -> float | None:
    """A vector norm's order where the norm of the parts' norms is the row's (any p > 0, and
    -inf: ``(sum_j ((sum_i |x_ij|^p)^(1/p))^p)^(1/p)``); None for p <= 0 (p = 0 counts the
    non-zeros: the parts' counts would be counted as non-zeros)."""
    p = arg(n, 1, "ord", 2)
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        return None
    return p if p > 0 or p == -math.inf else None


def _reduction_args(n: Node, src: Node, k: int = 1) -> list:
    """``n``'s op over the last ``k`` dims of ``src``, those dims dropped."""
    dims = list(range(-k, 0))
    if n.opname == "linalg_vector_norm":
        return [ref(src), _norm_order(n), dims, False]
    return [ref(src), dims, False]


def _reduced_suffix(n: Node, rank: int) -> int:
    """How many trailing dims ``n`` (a sum/mean/amax/amin/vector norm) reduces, where they are
    a suffix of its input's ``rank`` dims; 0 where they are not."""
    if n.opname in ("sum", "mean") and n.target.endswith(".default"):
        dims = None
    else:
        dims = arg(n, 2 if n.opname == "linalg_vector_norm" else 1, "dim", None)
    if dims is None or dims == []:
        return rank
    dims = dims if isinstance(dims, list) else [dims]
    if not all(isinstance(d, int) for d in dims):
        return 0
    got = sorted({d % rank for d in dims})
    return len(got) if got == list(range(rank - len(got), rank)) else 0


def _parts(rows: int, length: int) -> int:
    """Parts to cut each row in: a power of two dividing ``length``, each part at least
    SPLIT_PART_LEAST long, rows x parts at most SPLIT_BLOCKS_MOST; 1 where none is."""
    parts = 1
    while length % (parts * 2) == 0 and length // (parts * 2) >= SPLIT_PART_LEAST \
            and rows * parts * 2 <= SPLIT_BLOCKS_MOST:
        parts *= 2
    return parts


def _long_rows(x: Node, k: int, device: str = "cuda") -> tuple[list[int], int, int] | None:
    """(leading dims, row length, parts) where a reduction over the last ``k`` dims of ``x``
    is worth cutting into parts (few rows, each long, ``x`` contiguous so the rows can be
    viewed as parts); None elsewhere. A whole tensor reduced to one value past what one
    kernel reduces whole (``lower.MAX_FULL_REDUCTION``: a loss's mean), or rows of
    SPLIT_LEAST_LEN or more, fewer than the GPU's SMs or (where a core takes a row) than
    CPU_SPLIT_ROWS_BELOW."""
    if x.shape is None or not 0 < k <= len(x.shape) or (
            x.stride is not None and x.stride != contiguous_strides(x.shape)):
        return None
    lead = list(x.shape[:len(x.shape) - k])
    rows, length = math.prod(lead), math.prod(x.shape[len(x.shape) - k:])
    few = SPLIT_ROWS_BELOW if device == "cuda" else CPU_SPLIT_ROWS_BELOW
    if not ((rows == 1 and length > MAX_FULL_REDUCTION)
            or (rows < few and length >= SPLIT_LEAST_LEN)):
        return None
    parts = _parts(rows, length)
    return (lead, length, parts) if parts >= 2 else None


def _split_long_rows(g: Graph) -> None:
    for n in list(g.calls()):
        target = _SPLITTABLE.get(n.opname)
        src = node_ref(n.args[0]) if n.args else None
        if target is None or src is None or n.dtype not in ("float32", "float64") \
                or n.kwargs.get("dtype") is not None or n.shape is None \
                or (n.opname == "linalg_vector_norm" and _norm_order(n) is None):
            continue
        x = g.node(src)
        if x.dtype != n.dtype or not x.shape:
            continue
        found = _long_rows(x, _reduced_suffix(n, len(x.shape)), g.device)
        if found is None:
            continue
        lead, length, parts = found
        b = Builder(g, n)
        shape, k = _cut(list(x.shape), len(lead), parts, length)
        cut = _chain_as(g, x, n, shape) or b.add(
            "aten.view.default", [ref(x), shape], shape, n.dtype, name=f"{n.name}_rows")
        partial = b.add(target, _reduction_args(n, cut, k), lead + [parts], n.dtype,
                        name=f"{n.name}_parts")
        if list(n.shape) == lead:   # the reduced dims dropped: the parts' reduction is it
            b.become(target, _reduction_args(n, partial))
        else:                       # kept as size-1 dims: a view of the parts' reduction
            whole = b.add(target, _reduction_args(n, partial), lead, n.dtype,
                          name=f"{n.name}_whole")
            b.become("aten.view.default", [ref(whole), list(n.shape)])


def _cut(full: list[int], at: int, parts: int, length: int) -> tuple[list[int], int]:
    """The shape the parts are reduced in, and how many trailing dims each part spans. The
    first reduced dim (``full[at]``) cut in ``parts`` where they divide it: the other dims
    stay, so an input broadcast along them is still a view in the cut; else the reduced dims
    flattened into ``[parts, length // parts]``."""
    if full[at] % parts == 0:
        return full[:at] + [parts, full[at] // parts] + full[at + 1:], len(full) - at
    return full[:at] + [parts, length // parts], 1


def _chain_as(g: Graph, x: Node, reduction: Node, shape: list[int]) -> Node | None:
    """``x`` computed in ``shape`` (its elements in the same order: ``_cut``'s of x's shape),
    where it is a pointwise chain read only by ``reduction``: the chain's nodes take the new
    shape and its inputs are viewed in it (``regroup.recast``), so the parts' reduction reads
    the chain's inputs in one kernel (a loss's ``(a - b) ** 2`` summed in parts) instead of a
    kernel writing ``x`` whole for a view of it to read. Its inputs may be of x's shape,
    single values, or anything that broadcasts to x along whole runs of the cut. None (the
    graph unchanged) elsewhere."""
    users = g.users()
    full = list(x.shape or [])
    returned = {r for r, us in users.items() if "output" in us and r != x.name}
    chain = chain_of(g, [x], full, returned, False, users)   # a returned link is an input
    if chain is None:
        return None
    names = {c.name for c in chain}
    if set(users.get(x.name, [])) != {reduction.name} or any(
            not set(users.get(c.name, [])) <= names for c in chain if c is not x):
        return None   # a link of the chain is read elsewhere (or returned) in its own shape
    return x if recast(g, chain, full, shape, set(), suffix="_cut") else None


def _split_long_norm(g: Graph) -> None:
    if g.device != "cuda":
        return
    for n in list(g.calls()):
        if n.target != "aten.layer_norm.default" or n.dtype != "float32" or n.shape is None:
            continue
        x = g.node(node_ref(n.args[0]))
        k = len(n.args[1])
        found = _long_rows(x, k) if x.dtype == "float32" else None
        if found is None:
            continue
        lead, length, parts = found
        w, bias = (node_ref(n.args[i]) if len(n.args) > i else None for i in (2, 3))
        eps = n.args[4] if len(n.args) > 4 else 1e-5
        b = Builder(g, n)
        cut = b.add("aten.view.default", [ref(x), lead + [parts, length // parts]],
                    lead + [parts, length // parts], name=f"{n.name}_rows")
        each, one = lead + [parts], lead + [1]
        # both from one pass over the part (a (var, mean) tuple, as torch.var_mean gives)
        both = b.add("aten.var_mean.correction", [ref(cut), [-1]], each,
                     kwargs={"correction": 0, "keepdim": False})
        both.shape, both.stride = None, None
        vars_ = b.add("getitem", [ref(both), 0], each)
        means = b.add("getitem", [ref(both), 1], each)
        mean = b.add("aten.mean.dim", [ref(means), [-1], True], one)
        gap = b.add("aten.sub.Tensor", [ref(means), ref(mean)], each)
        gap2 = b.add("aten.mul.Tensor", [ref(gap), ref(gap)], each)
        between = b.add("aten.mean.dim", [ref(gap2), [-1], True], one)
        within = b.add("aten.mean.dim", [ref(vars_), [-1], True], one)
        var = b.add("aten.add.Tensor", [ref(within), ref(between)], one)
        var = b.add("aten.add.Tensor", [ref(var), eps], one)
        rstd = b.add("aten.rsqrt.default", [ref(var)], one)
        wide = lead + [1] * k
        mean = b.add("aten.view.default", [ref(mean), wide], wide)
        rstd = b.add("aten.view.default", [ref(rstd), wide], wide)
        y = b.add("aten.sub.Tensor", [ref(x), ref(mean)], x.shape)
        last = ("aten.mul.Tensor", [ref(y), ref(rstd)])
        for operand, op in ((w, "aten.mul.Tensor"), (bias, "aten.add.Tensor")):
            if operand is not None:
                y = b.add(last[0], last[1], x.shape)
                last = (op, [ref(y), {"node": operand}])
        b.become(*last)


# -- dead code ----------------------------------------------------------------------------------
# Ops that draw from the random generator: dropping one would shift every later draw.
RANDOM_OPS = ("rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
           "bernoulli", "normal", "uniform", "multinomial", "exponential", "geometric",
           "cauchy", "log_normal", "poisson", "dropout", "native_dropout", "alpha_dropout",
           "feature_dropout", "feature_alpha_dropout", "rrelu", "rrelu_with_noise")


def draws_random(n: Node) -> bool:
    """Whether ``n`` draws from the random generator: a dropout of p = 0 does not (ATen
    returns its input first), ``native_dropout`` does even then, an eval-mode ``rrelu``
    does not."""
    name = n.opname.rstrip("_")
    if name in DROPOUTS and dropout_of_zero(n.args, n.kwargs):
        return False
    if name == "rrelu":   # (self, lower, upper, training): eval mode is a fixed slope
        return bool(n.kwargs.get("training", n.args[3] if len(n.args) > 3 else False))
    return name in RANDOM_OPS


def _has_effect(n: Node) -> bool:
    """Whether ``n`` does something besides making its result."""
    return bool(n.mutates) or n.opname.endswith("_") or draws_random(n)


def _drop_dead(g: Graph) -> None:
    """Remove the calls whose results reach neither an output nor an op with an effect."""
    by_name = {n.name: n for n in g.nodes}
    live: set[str] = set()
    todo = [r for r in g.output_names()] + [n.name for n in g.calls() if _has_effect(n)]
    while todo:
        name = todo.pop()
        if name in live or name not in by_name:
            continue
        live.add(name)
        todo.extend(by_name[name].inputs())
    g.nodes = [n for n in g.nodes if n.op != "call_function" or n.name in live]
