"""Views that only regroup dims, moved out of the way of fusion (a rewrite, before planning).

``x.view(b, c, -1)`` between a pointwise chain and a softmax over the flattened pixels, and
``.view(b, c, d, h, w)`` back before a scale, cut the forward into three kernels: a kernel's
values all share one shape (``lower.build_spec``), and a view of a value computed in the
kernel is another shape. Where a view merges or splits neighbouring dims of a contiguous
tensor (the same elements in the same order), the pointwise chain before it is computed in the
view's shape instead (``hoist``: its inputs viewed so, a broadcast operand where its dims
regroup as whole groups, ``[1, C, 1, 1, 1]`` -> ``[1, C, 1]``), and the pointwise chain after
a view is computed in the shape viewed (``sink``), the view moved after it. The chain, the
softmax and the scale then become one kernel: KernelBench's ConvTranspose3d_AvgPool_Clamp_
Softmax_Multiply read and wrote its 1 GB tensor three times more than torch.compile.

Exact: the same ops on the same elements. Deterministic, like every rewrite.

>>> views_through_pointwise(graph)   # doctest: +SKIP
"""

from __future__ import annotations

import math

from ...graph import Graph, Node
from .decompose import Builder, replace_refs, unique_name
from .expand import node_role
from .helpers import contiguous_strides, node_ref

# the ops that only give a contiguous tensor other dims (the shapes say how: ``_regrouping``)
VIEWS = ("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
         "aten.flatten.using_ints", "aten.unflatten.int")


def views_through_pointwise(g: Graph) -> None:
    """Each regrouping view: the chain before it hoisted into its shape, else the chain
    after it sunk into its input's."""
    for v in [n for n in g.calls() if n.target in VIEWS]:
        if v.name in {n.name for n in g.nodes} and not _hoist(g, v):
            _sink(g, v)


def groups(a: list[int], b: list[int]) -> list[tuple[list[int], list[int]]] | None:
    """``a`` and ``b`` (equal products) cut into runs of neighbouring dims of equal products,
    each run of one merged into the other's, size-1 dims on their own; None where a dim of one
    straddles two of the other (a reshape that is not a regrouping).

    >>> groups([2, 3, 4, 5], [2, 12, 5])
    [([2], [2]), ([3, 4], [12]), ([5], [5])]
    >>> groups([2, 3], [3, 2]) is None
    True
    """
    out: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(a) or j < len(b):
        if i < len(a) and a[i] == 1 and (j >= len(b) or b[j] != 1):
            out.append(([1], []))
            i += 1
            continue
        if j < len(b) and b[j] == 1 and (i >= len(a) or a[i] != 1):
            out.append(([], [1]))
            j += 1
            continue
        if i >= len(a) or j >= len(b):
            return None
        ga, gb = [a[i]], [b[j]]
        i, j = i + 1, j + 1
        while math.prod(ga) != math.prod(gb):
            if math.prod(ga) < math.prod(gb):
                if i >= len(a):
                    return None
                ga.append(a[i])
                i += 1
            else:
                if j >= len(b):
                    return None
                gb.append(b[j])
                j += 1
        if len(ga) > 1 and len(gb) > 1:
            return None   # 2 x 3 as 3 x 2: neither merges into the other
        out.append((ga, gb))
    return out


def regrouped(leaf: list[int], full: list[int], shape: list[int]) -> list[int] | None:
    """The shape an operand of shape ``leaf`` (broadcast against ``full``) takes when ``full``
    is regrouped as ``shape``: each run of dims whole or all of size 1 in it; None else.

    >>> regrouped([64, 1, 1, 1], [32, 64, 32, 64, 64], [32, 64, 131072])
    [1, 64, 1]
    """
    runs = groups(full, shape)
    if runs is None or len(leaf) > len(full):
        return None
    padded = [1] * (len(full) - len(leaf)) + list(leaf)
    out, k = [], 0
    for ga, gb in runs:
        mine = padded[k:k + len(ga)]
        k += len(ga)
        if mine == ga:
            out += gb
        elif all(d == 1 for d in mine):
            out += [1] * len(gb)
        else:
            return None
    return out


def _computed(n: Node, g: Graph) -> bool:
    """Whether a kernel of ours may compute ``n`` (a fusion the move could break or make)."""
    return n.op == "call_function" and node_role(n, g) not in (None, "view")


def follows_broadcasting(n: Node, g: Graph) -> bool:
    """A pointwise op whose inputs line up with its output by broadcasting alone (batch norm
    in eval mode is pointwise, but its statistics follow dim 1)."""
    return node_role(n, g) == "pointwise" and "batch_norm" not in n.opname


def _regrouping(v: Node, g: Graph) -> tuple[Node, list[int], list[int]] | None:
    """(input, its shape, the view's shape) of a view of a contiguous tensor that regroups
    its dims; None for any other view."""
    r = node_ref(v.args[0]) if v.args else None
    src = g.node(r) if r else None
    if src is None or src.shape is None or v.shape is None or src.dtype != v.dtype:
        return None
    full, shape = list(src.shape), list(v.shape)
    if full == shape or math.prod(full) != math.prod(shape) or groups(full, shape) is None:
        return None
    if src.stride is not None and list(src.stride) != contiguous_strides(full):
        return None
    return src, full, shape


def chain_of(g: Graph, start: list[Node], full: list[int], stop: set[str], down: bool,
           users: dict[str, list[str]]) -> list[Node] | None:
    """The pointwise ops of shape ``full`` reached from ``start`` (its producers going up,
    its users going down), not through ``stop``; None where one of them cannot follow."""
    chain, todo, seen = [], list(start), set(stop)
    while todo:
        m = todo.pop()
        if m.name in seen:
            continue
        seen.add(m.name)
        if not follows_broadcasting(m, g) or list(m.shape or []) != full:
            return None
        chain.append(m)
        nxt = users.get(m.name, []) if down else m.inputs()
        for r in nxt:
            if r == "output" or r in seen:
                continue
            n = g.node(r)
            if n.op == "call_function" and follows_broadcasting(n, g) \
                    and list(n.shape or []) == full:
                todo.append(n)
    return chain


def recast(g: Graph, chain: list[Node], full: list[int], shape: list[int],
           keep: set[str], suffix: str = "_regrouped") -> bool:
    """The chain's ops computed in ``shape``: each input not in ``keep`` or the chain viewed
    in it (a reshape before the first op reading it). False, and nothing changed, where an
    input does not regroup (a strided one, a broadcast across a run)."""
    names = {c.name for c in chain} | keep
    leaves = sorted({r for c in chain for r in c.inputs() if r not in names})
    as_shape = {}
    for r in leaves:
        leaf = g.node(r)
        if leaf.shape is None:
            return False
        if math.prod(leaf.shape) == 1 and len(leaf.shape) <= len(shape):
            as_shape[r] = list(leaf.shape)   # one value: it broadcasts in any shape
            continue
        # of the chain's own shape: it follows any reshape that keeps the elements' order
        new = list(shape) if list(leaf.shape) == full else regrouped(list(leaf.shape), full, shape)
        if new is None or (leaf.stride is not None
                           and list(leaf.stride) != contiguous_strides(list(leaf.shape))):
            return False
        as_shape[r] = new
    order = {n.name: i for i, n in enumerate(g.nodes)}
    for r, new in as_shape.items():
        if new == list(g.node(r).shape or []):
            continue
        first = min((c for c in chain if r in c.inputs()), key=lambda c: order[c.name])
        view = Builder(g, first).add("aten.view.default", [{"node": r}, new], new,
                                     g.node(r).dtype or "float32", name=f"{r}{suffix}")
        for c in chain:
            c.args, c.kwargs = replace_refs(c.args, r, view.name), \
                replace_refs(c.kwargs, r, view.name)
    for c in chain:
        c.shape, c.stride = list(shape), contiguous_strides(list(shape))
    return True


def _hoist(g: Graph, v: Node) -> bool:
    """``view(x)`` where ``x`` is a pointwise chain read only through the view: the chain
    computed in the view's shape, the view's readers reading ``x``."""
    found = _regrouping(v, g)
    if found is None:
        return False
    x, full, shape = found
    users = g.users()
    if users.get(x.name, []) != [v.name]:
        return False
    chain = chain_of(g, [x], full, set(), False, users)
    if not chain:
        return False
    names = {c.name for c in chain}
    if any(not set(users.get(c.name, [])) <= names for c in chain if c is not x):
        return False   # a link read elsewhere (or returned) in its own shape
    # only where the view's readers may fuse with the chain, and the chain's inputs are no
    # kernel's (the library's, the forward's inputs): else it would leave one fusion for another
    if not any(r != "output" and _computed(g.node(r), g) for r in users.get(v.name, [])) \
            or any(_computed(g.node(r), g) for c in chain for r in c.inputs()
                   if r not in names):
        return False
    if not recast(g, chain, full, shape, set()):
        return False
    for m in g.nodes:
        m.args, m.kwargs = replace_refs(m.args, v.name, x.name), \
            replace_refs(m.kwargs, v.name, x.name)
    g.outputs = replace_refs(g.outputs, v.name, x.name)
    g.nodes.remove(v)
    return True


def _sink(g: Graph, v: Node) -> bool:
    """The pointwise ops after ``view(s)`` computed in ``s``'s shape; what reads them
    from outside reads a view of them back in the view's shape."""
    found = _regrouping(v, g)
    if found is None:
        return False
    s, shape, full = found          # the chain runs in ``full`` (the view's shape) now
    users = g.users()
    readers = users.get(v.name, [])
    if not readers or "output" in readers:
        return False
    chain = chain_of(g, [g.node(r) for r in readers], full, {v.name}, True, users)
    if not chain or not _computed(s, g):
        return False   # nothing to join: the view's input is the library's or an input
    names = {c.name for c in chain}
    if any(u != "output" and _computed(g.node(u), g) for c in chain
           for u in users.get(c.name, []) if u not in names):
        return False   # a reader after the chain would fuse with it in the view's shape
    if not recast(g, chain, full, shape, {v.name}):
        return False
    for c in chain:
        c.args, c.kwargs = replace_refs(c.args, v.name, s.name), \
            replace_refs(c.kwargs, v.name, s.name)
    outside = {c.name: [u for u in users.get(c.name, []) if u not in names] for c in chain}
    order = {n.name: i for i, n in enumerate(g.nodes)}
    for c in sorted(chain, key=lambda c: order[c.name]):
        if not outside[c.name]:
            continue
        back = Node(name=unique_name(g, f"{c.name}_viewed"), op="call_function",
                    target="aten.view.default", op_class=v.op_class,
                    args=[{"node": c.name}, list(full)], shape=list(full), dtype=c.dtype,
                    stride=contiguous_strides(list(full)), lowers_to=["aten.view.default"])
        g.nodes.insert(g.nodes.index(c) + 1, back)
        for u in outside[c.name]:
            if u == "output":
                g.outputs = replace_refs(g.outputs, c.name, back.name)
            else:
                m = g.node(u)
                m.args, m.kwargs = replace_refs(m.args, c.name, back.name), \
                    replace_refs(m.kwargs, c.name, back.name)
    if not users.get(v.name) or all(u in names for u in users[v.name]):
        g.nodes.remove(v)
    return True
