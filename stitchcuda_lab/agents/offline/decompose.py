"""Losses and norms written as the ops the kernels compute, applied by ``rewrite`` first.

The graph keeps composite ops (``cross_entropy_loss``, ``mse_loss``, ...) as one node; each is
rewritten here into aten ops the compiler has templates for, so a loss becomes a row kernel
(per-row terms with their reductions) and a reduction over the rows:

- ``mse_loss``, ``smooth_l1_loss``, ``huber_loss``, ``l1_loss``, ``kl_div`` with a mean or
  sum reduction: the same loss with ``reduction=none`` (one pointwise op, ``pointwise.py``)
  and a ``mean``/``sum`` of it;
- ``cross_entropy_loss`` (class indices, no weight or label smoothing): ``logsumexp`` of each
  row minus the row's target logit (``gather``), zero where the target is ``ignore_index``,
  summed and divided by the number of counted rows;
- ``triplet_margin_loss``: the two pairwise distances ``||a - b + eps||_p`` as row sums,
  ``clamp_min(margin + d_ap - d_an, 0)``, then the reduction;
- ``cosine_similarity``: ``sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps))`` (three sums
  over the same rows);
- ``prelu``: ``where(x > 0, x, x * w)``, the weight viewed as ``[C, 1, ...]`` against the
  channel dim (one pointwise kernel, fused with what is around it);
- ``glu``: the two halves along its dim (``narrow`` views), ``a * sigmoid(b)``;
- ``broadcast_tensors`` of tensors that already share one shape: its items are the tensors;
- ``triu``/``tril`` of a float tensor: ``where(j - i >= k, x, 0)`` (``<=`` for ``tril``), the
  row and column numbers two small constants (``arange``) the kernel reads broadcast, so the
  mask joins the kernel of the op before it (a GEMM's epilogue) instead of a pass of its own.

The last node of each expansion keeps the original's name, so its users and the graph's
outputs are unchanged; every node written is an aten call the program can still run as such.
"""

from __future__ import annotations

from typing import Any

from ... import aten
from ...graph import Graph, Node
from .helpers import contiguous_strides, node_ref

# reduction= of aten loss ops: 0 none, 1 mean, 2 sum
_NONE, _MEAN, _SUM = 0, 1, 2
# losses whose reduction=none form is one pointwise op: name -> position of ``reduction``
ELEMENTWISE_LOSSES = {"mse_loss": 2, "smooth_l1_loss": 2, "huber_loss": 2, "l1_loss": 2,
                      "kl_div": 2}


class Builder:
    """New nodes inserted before ``anchor`` in graph order, with unique names."""

    def __init__(self, g: Graph, anchor: Node) -> None:
        self.g, self.anchor = g, anchor

    def add(self, target: str, args: list, shape: list[int], dtype: str = "float32",
            kwargs: dict | None = None, op_class: str | None = None,
            name: str | None = None) -> Node:
        name = unique_name(self.g, name or f"{self.anchor.name}_{aten.short(target)}")
        n = Node(name=name, op="call_function", target=target,
                 op_class=op_class or aten.category(target), args=args, kwargs=kwargs or {},
                 shape=list(shape), dtype=dtype, stride=contiguous_strides(list(shape)),
                 lowers_to=[target])
        k = self.g.nodes.index(self.anchor)
        self.g.nodes.insert(k, n)
        return n

    def become(self, target: str, args: list, kwargs: dict | None = None) -> None:
        """The anchor turns into the expansion's last op (same name, shape and users)."""
        a = self.anchor
        a.lowers_to = list(dict.fromkeys([target, a.target] + a.lowers_to))
        a.target, a.args, a.kwargs = target, args, kwargs or {}
        a.op_class = aten.category(target)


def unique_name(g: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``... where a node of ``g`` has the name already."""
    names = {n.name for n in g.nodes}
    name, i = base, 1
    while name in names:
        name, i = f"{base}_{i}", i + 1
    return name


def ref(n: Node) -> dict:
    """The argument that names ``n``'s result."""
    return {"node": n.name}


def arg(n: Node, pos: int, name: str, default: Any) -> Any:
    if name in n.kwargs:
        return n.kwargs[name]
    return n.args[pos] if len(n.args) > pos and n.args[pos] is not None else default


def decompose(g: Graph) -> None:
    """Rewrite every loss and norm the module docstring lists, in place."""
    _drop_same_shape_broadcasts(g)
    for n in list(g.calls()):
        if n.shape is None or n.dtype not in ("float32", "float64"):
            continue
        name = n.opname
        if name in ELEMENTWISE_LOSSES:
            _elementwise_loss(g, n)
        elif name == "cross_entropy_loss":
            _cross_entropy(g, n)
        elif name == "triplet_margin_loss":
            _triplet(g, n)
        elif name == "cosine_similarity":
            _cosine(g, n)
        elif name == "prelu":
            _prelu(g, n)
        elif name == "glu":
            _glu(g, n)
        elif name in ("triu", "tril"):
            _triangular(g, n)


def _drop_same_shape_broadcasts(g: Graph) -> None:
    users = g.users()
    for n in list(g.calls()):
        if n.opname != "broadcast_tensors" or not n.args or not isinstance(n.args[0], list):
            continue
        refs = [node_ref(a) for a in n.args[0]]
        shapes = [g.node(r).shape if r else None for r in refs]
        if None in refs or None in shapes or any(s != shapes[0] for s in shapes):
            continue
        items = users.get(n.name, [])
        if any(u == "output" or g.node(u).target != "getitem" for u in items):
            continue
        for u in items:
            item = g.node(u)
            src = refs[int(item.args[1])]
            for m in g.nodes:
                m.args = replace_refs(m.args, u, src)
                m.kwargs = replace_refs(m.kwargs, u, src)
            g.outputs = replace_refs(g.outputs, u, src)
            g.nodes.remove(item)
        g.nodes.remove(n)


def replace_refs(x: Any, old: str, new: str) -> Any:
    """``x`` (args, kwargs, outputs) with every reference to node ``old`` naming ``new``."""
    if isinstance(x, dict):
        if set(x) == {"node"}:
            return {"node": new} if x["node"] == old else x
        return {k: replace_refs(v, old, new) for k, v in x.items()}
    if isinstance(x, list):
        return [replace_refs(v, old, new) for v in x]
    return x


def _reduce_all(b: Builder, x: Node, red: int) -> None:
    b.become("aten.mean.default" if red == _MEAN else "aten.sum.default", [ref(x)])


def _elementwise_loss(g: Graph, n: Node) -> None:
    pos = ELEMENTWISE_LOSSES[n.opname]
    red = arg(n, pos, "reduction", _MEAN)
    a, t = (g.node(node_ref(n.args[i])) for i in (0, 1))
    if red not in (_MEAN, _SUM) or a.shape is None or a.shape != t.shape:
        return
    b = Builder(g, n)
    args = list(n.args) + [None] * (pos + 1 - len(n.args))
    args[pos] = _NONE
    kwargs = {k: v for k, v in n.kwargs.items() if k != "reduction"}
    per = b.add(n.target, args[:pos + 1] + list(n.args[pos + 1:]), a.shape, n.dtype, kwargs,
                op_class="pointwise")
    _reduce_all(b, per, red)


def _cross_entropy(g: Graph, n: Node) -> None:
    x, t = (g.node(node_ref(n.args[i])) for i in (0, 1))
    weight = arg(n, 2, "weight", None)
    red = arg(n, 3, "reduction", _MEAN)
    ignore = arg(n, 4, "ignore_index", -100)
    smoothing = arg(n, 5, "label_smoothing", 0.0)
    if x.shape is None or len(x.shape) != 2 or t.dtype != "int64" or weight is not None \
            or smoothing or red not in (_MEAN, _SUM) or t.shape != x.shape[:1]:
        return
    N = x.shape[0]
    b = Builder(g, n)
    ti = b.add("aten.unsqueeze.default", [ref(t), 1], [N, 1], "int64")
    lse = b.add("aten.logsumexp.default", [ref(x), [1], True], [N, 1], x.dtype)
    # ATen's loss is log_softmax's, NaN for a row whose max is +inf (x - max meets
    # inf - inf) where logsumexp is +inf: lse + (lse - lse) is lse itself, NaN at +-inf
    zero = b.add("aten.sub.Tensor", [ref(lse), ref(lse)], [N, 1], x.dtype)
    lse = b.add("aten.add.Tensor", [ref(lse), ref(zero)], [N, 1], x.dtype)
    pick = b.add("aten.gather.default", [ref(x), 1, ref(ti)], [N, 1], x.dtype)
    diff = b.add("aten.sub.Tensor", [ref(lse), ref(pick)], [N, 1], x.dtype)
    valid = b.add("aten.ne.Scalar", [ref(ti), ignore], [N, 1], "bool")
    loss = b.add("aten.where.ScalarOther", [ref(valid), ref(diff), 0.0], [N, 1], x.dtype)
    if red == _SUM:
        b.become("aten.sum.default", [ref(loss)])
        return
    total = b.add("aten.sum.default", [ref(loss)], [], x.dtype)
    count = b.add("aten.sum.default", [ref(valid)], [], "int64")
    b.become("aten.div.Tensor", [ref(total), ref(count)])


def _distance(b: Builder, x: Node, y: Node, p: float, eps: float) -> Node:
    """``||x - y + eps||_p`` along the last dim (``pairwise_distance``), keepdim False."""
    d = b.add("aten.sub.Tensor", [ref(x), ref(y)], x.shape, x.dtype)
    d = b.add("aten.add.Tensor", [ref(d), eps], x.shape, x.dtype)
    return b.add("aten.linalg_vector_norm.default", [ref(d), p, [-1], False], x.shape[:-1],
                 x.dtype)


def _triplet(g: Graph, n: Node) -> None:
    a, pz, ng = (g.node(node_ref(n.args[i])) for i in (0, 1, 2))
    margin = arg(n, 3, "margin", 1.0)
    p = arg(n, 4, "p", 2.0)
    eps = arg(n, 5, "eps", 1e-6)
    swap = arg(n, 6, "swap", False)
    red = arg(n, 7, "reduction", _MEAN)
    if swap or red not in (_MEAN, _SUM) or a.shape is None or len(a.shape) != 2 \
            or not (a.shape == pz.shape == ng.shape):
        return
    b = Builder(g, n)
    dap, dan = _distance(b, a, pz, p, eps), _distance(b, a, ng, p, eps)
    gap = b.add("aten.sub.Tensor", [ref(dap), ref(dan)], dap.shape, a.dtype)
    gap = b.add("aten.add.Tensor", [ref(gap), margin], dap.shape, a.dtype)
    loss = b.add("aten.clamp_min.default", [ref(gap), 0.0], dap.shape, a.dtype)
    _reduce_all(b, loss, red)


def _cosine(g: Graph, n: Node) -> None:
    x1, x2 = (g.node(node_ref(n.args[i])) for i in (0, 1))
    dim = arg(n, 2, "dim", 1)
    eps = arg(n, 3, "eps", 1e-8)
    if x1.shape is None or x1.shape != x2.shape or not x1.shape:
        return
    b = Builder(g, n)
    shape = list(n.shape)
    dims = [int(dim) % len(x1.shape)]
    prod = b.add("aten.mul.Tensor", [ref(x1), ref(x2)], x1.shape, x1.dtype)
    dot = b.add("aten.sum.dim_IntList", [ref(prod), dims], shape, x1.dtype)
    norms = []
    for x in (x1, x2):
        nx = b.add("aten.linalg_vector_norm.default", [ref(x), 2, dims], shape, x.dtype)
        norms.append(b.add("aten.clamp_min.default", [ref(nx), eps], shape, x.dtype))
    den = b.add("aten.mul.Tensor", [ref(norms[0]), ref(norms[1])], shape, x1.dtype)
    b.become("aten.div.Tensor", [ref(dot), ref(den)])


def _prelu(g: Graph, n: Node) -> None:
    x, w = (g.node(node_ref(n.args[i])) if node_ref(n.args[i]) else None for i in (0, 1))
    if x is None or w is None or not x.shape or w.shape is None or len(w.shape) != 1:
        return   # (a 0-d input would broadcast to the weight's [1])
    c = w.shape[0]
    if c != 1 and (len(x.shape) < 2 or x.shape[1] != c):
        return
    b = Builder(g, n)
    if c != 1 and len(x.shape) > 2:   # one weight per channel (dim 1)
        w = b.add("aten.view.default", [ref(w), [c] + [1] * (len(x.shape) - 2)],
                  [c] + [1] * (len(x.shape) - 2), w.dtype or x.dtype)
    neg = b.add("aten.mul.Tensor", [ref(x), ref(w)], x.shape, x.dtype)
    pos = b.add("aten.gt.Scalar", [ref(x), 0], x.shape, "bool")
    b.become("aten.where.self", [ref(pos), ref(x), ref(neg)])


def _glu(g: Graph, n: Node) -> None:
    src = node_ref(n.args[0]) if n.args else None
    x = g.node(src) if src else None
    if x is None or x.shape is None or not x.shape:
        return
    dim = int(arg(n, 1, "dim", -1)) % len(x.shape)
    if x.shape[dim] % 2:
        return
    half = x.shape[dim] // 2
    shape = list(x.shape)
    shape[dim] = half
    b = Builder(g, n)
    first = b.add("aten.narrow.default", [ref(x), dim, 0, half], shape, x.dtype)
    second = b.add("aten.narrow.default", [ref(x), dim, half, half], shape, x.dtype)
    for v in (first, second):   # views of x: its strides (the program makes them contiguous)
        v.stride = list(x.stride) if x.stride is not None else contiguous_strides(x.shape)
    gate = b.add("aten.sigmoid.default", [ref(second)], shape, x.dtype)
    b.become("aten.mul.Tensor", [ref(first), ref(gate)])


# Row and column numbers are exact in float32 below 2^24
_EXACT_INDEX = 1 << 24


def _triangular(g: Graph, n: Node) -> None:
    """``triu(x, k)`` as ``where(col - row >= k, x, 0)`` (``tril``: ``<=``): a masked value is
    0 whatever ``x`` holds there (NaN and inf too), as ATen's is."""
    x, k = node_ref(n.args[0]), arg(n, 1, "diagonal", 0)
    if x is None or len(n.shape) < 2 or not isinstance(k, int) \
            or max(n.shape[-2:]) >= _EXACT_INDEX:
        return
    m, c = n.shape[-2:]
    rows = _index_constant(g, f"{n.name}_row", m, [m, 1])
    cols = _index_constant(g, f"{n.name}_col", c, [c])
    b = Builder(g, n)
    d = b.add("aten.sub.Tensor", [ref(cols), ref(rows)], [m, c], "float32", name=f"{n.name}_diag")
    cmp = "aten.ge.Scalar" if n.opname == "triu" else "aten.le.Scalar"
    mask = b.add(cmp, [ref(d), float(k)], [m, c], "bool", name=f"{n.name}_keep")
    b.become("aten.where.ScalarOther", [ref(mask), {"node": x}, 0.0])


def _index_constant(g: Graph, base: str, count: int, shape: list[int]) -> Node:
    """A constant of the numbers 0 .. count - 1 in float32 viewed as ``shape``: the program
    makes it with ``torch.arange`` (``program._init``), placed first among the graph's nodes."""
    name = unique_name(g, base)
    node = Node(name=name, op="placeholder", target="", op_class="input", shape=list(shape),
                dtype="float32", stride=contiguous_strides(list(shape)), kind="const",
                fqn=name, value={"arange": count})
    g.nodes.insert(0, node)
    return node
