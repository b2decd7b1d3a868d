"""Lower a group of graph nodes into one kernel (``KernelSpec``, ``ir.py``) both backends print.

A group is either *pointwise* (every value has the output shape S; external operands broadcast
into it) or *rowwise*: S is split into row dims and reduced dims R; values are *full* (shape S,
one per element) or *row* (one per row: reductions and what is computed from them). Rowwise
kernels make passes over each row: a pass computes the reductions whose inputs are available,
the last pass writes the full outputs. A *pool* group iterates a pooling node's output: the
nodes before the pool are computed per element of its window (``win``), the nodes after it per
output element (``pool.py``).

``build_spec`` finds the group's geometry, expands each node (``expand.py``), adds an output
operand for every value read outside the group and runs the passes (``passes.py``). It raises
``Unsupported`` (with the reason a person reads) for anything else; the planner uses it as the
legality test for every fusion it proposes.

>>> spec = build_spec(graph, ["mul", "relu"], "k0")          # doctest: +SKIP
>>> spec.kind, spec.dims                                     # doctest: +SKIP
('pointwise', [4096])
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...aten import FLOAT_DTYPES
from .expand import expand, kept_in_library, node_role, row_geometry
from .helpers import contiguous_strides, node_ref
from .ir import KernelSpec, Operand, Stmt, Unsupported
from .layout import split_view_strides, to_channels_last
from .pointwise import lit
from .passes import finish

if TYPE_CHECKING:
    from ...graph import Graph, Node

MAX_FULL_REDUCTION = 1 << 16
LOAD_DTYPES = FLOAT_DTYPES + ("bool", "int64", "int32", "int8", "uint8", "int16")   # kernels read


def build_spec(graph: Graph, ops: list[str], kname: str = "k0",
               nhwc: set[str] | frozenset[str] = frozenset(),
               split_rows: bool = False,
               views: dict[str, list[int]] | None = None) -> KernelSpec:
    """One kernel for the given nodes (library GEMM/conv nodes in ``ops`` are skipped).
    ``nhwc``: nodes that will be channels-last at run time, read (and the full-size outputs
    written) in that layout where the kernel allows it (``layout.to_channels_last``;
    ``split_rows``: the backend spreads few interleaved rows over many threads; ``views``:
    views of those that split their spatial dims, with their strides, ``split_views``)."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    nodes = sorted((graph.node(o) for o in ops), key=lambda n: order[n.name])
    nodes = [n for n in nodes if not kept_in_library(n, graph)]
    if not nodes:
        raise Unsupported("nothing to generate")
    roles = {}
    for n in nodes:
        r = node_role(n, graph)
        if r is None:
            raise Unsupported(f"{n.name}: {n.target} has no kernel template")
        roles[n.name] = r
    lw = Lowering(graph, nodes, *_geometry(graph, nodes, roles))
    pool = lw.pool_setup(roles)
    for n in nodes:
        if n.dtype is not None and n.dtype not in FLOAT_DTYPES + ("bool", "int64"):
            raise Unsupported(f"{n.name}: dtype {n.dtype}")
        lw.side_of(n)
        expand(lw, n, roles[n.name])
    lw.side_of(None)
    outputs = lw.outputs()
    kind = "pool" if pool else "rowwise" if lw.rowwise else "pointwise"
    spec = KernelSpec(name=kname, kind=kind,
                      dims=list(lw.S), reduce=[d in lw.Rset for d in range(lw.rank)],
                      acc=lw.acc, operands=lw.operands, stmts=lw.stmts,
                      ops=[n.name for n in nodes],
                      targets=sorted({n.target for n in nodes if n.target != "getitem"}),
                      outputs=outputs)
    if nhwc and lw.split is None:
        to_channels_last(spec, nhwc, split_rows, views)
    return finish(spec, lw.split)


def _geometry(graph: Graph, nodes: list[Node], roles: dict[str, str]):
    """(S, reduced dims, split, rowwise): the rows every reduction of the group shares, or for
    a pointwise group the largest shape every value broadcasts into."""
    geo = None
    pools = [n for n in nodes if roles[n.name] == "pool"]
    if pools:
        if len(pools) > 1 or any(r in ("reduction", "norm", "scan") for r in roles.values()):
            raise Unsupported(f"{pools[-1].name}: a pool shares its kernel with no other pool "
                              "or reduction")
        return list(pools[0].shape or []), [], None, False
    for n in nodes:
        if roles[n.name] in ("reduction", "norm", "scan"):
            g = row_geometry(n, graph)
            if geo is None:
                geo = g
            elif (list(g[0]), list(g[1]), g[2]) != (list(geo[0]), list(geo[1]), geo[2]):
                raise Unsupported(f"{n.name}: reduces over other rows than the rest of the group")
    if geo is not None:
        return list(geo[0]), list(geo[1]), geo[2], True
    shapes = [n.shape for n in nodes if roles[n.name] != "view" and n.shape is not None]
    if not shapes:
        raise Unsupported("no shaped values")
    return list(max(shapes, key=lambda s: math.prod(s))), [], None, False


class Lowering:
    """The group being lowered: its geometry, the operands and statements so far, and the
    IR value (``env``) of every node computed."""

    def __init__(self, graph: Graph, nodes: list[Node], S: list[int], R: list[int],
                 split: tuple[int, int] | None, rowwise: bool) -> None:
        self.graph, self.nodes, self.members = graph, nodes, {n.name for n in nodes}
        self.S, self.split, self.rowwise = S, split, rowwise
        rank = self.rank = len(S)
        # group norm's R is in split coordinates: its spatial dims of S (dim 1 is only partly
        # reduced; the split in passes.py handles it)
        self.Rset = set(R) if split is None else {d - 1 for d in R if d - 1 >= 2}
        if rowwise and len(self.Rset) == rank and split is None \
                and math.prod(S) > MAX_FULL_REDUCTION:
            raise Unsupported(f"full reduction over {math.prod(S)} elements needs a grid-wide "
                              "reduction (no template)")
        self.keep_form = [1 if d in self.Rset else S[d] for d in range(rank)]
        self.drop_form = [S[d] for d in range(rank) if d not in self.Rset]
        self.nonR = [d for d in range(rank) if d not in self.Rset]
        self.acc = "double" if any(n.dtype == "float64" for n in nodes) or any(
            graph.node(r).dtype == "float64" for n in nodes for r in n.inputs()) else "float"
        self.rowlen = math.prod(S[d] for d in range(rank) if d in self.Rset)
        if split is not None:
            self.rowlen *= S[split[0]] // split[1]
        self.operands: list[Operand] = []
        self.stmts: list[Stmt] = []
        self.env: dict[str, Any] = {}       # node -> var (or tuple of vars)
        self.level: dict[str, str] = {}     # var -> full | row
        self.ctypes: dict[str, str] = {}
        self._vars = 0
        self.out_shape = list(S)            # a pool group's output shape (S while in its window)
        self.window_in: list[int] = []      # ... and its pooled input's shape
        self.prologue: set[str] = set()     # ... and the members computed inside its window
        self.side = "full"                  # win while lowering a prologue node

    def pool_setup(self, roles: dict[str, str]) -> bool:
        """A pool group: the pooled input's shape and the members that feed the pool."""
        pool = next((n for n in self.nodes if roles[n.name] == "pool"), None)
        if pool is None:
            return False
        ref = node_ref(pool.args[0])
        src = self.graph.node(ref) if ref is not None else None
        if src is None or src.shape is None:
            raise Unsupported(f"{pool.name}: input is not a tensor")
        self.window_in = list(src.shape)
        stack = [ref]
        while stack:
            m = stack.pop()
            if m in self.members and m not in self.prologue:
                self.prologue.add(m)
                stack.extend(self.graph.node(m).inputs())
        return True

    def side_of(self, n: Node | None) -> None:
        """Lower ``n`` inside the pool's window (shape: the pooled input) or after it."""
        self.window(n is not None and n.name in self.prologue)

    def window(self, inside: bool) -> None:
        if self.window_in:
            self.side = "win" if inside else "full"
            self.S = self.window_in if inside else self.out_shape
            self.keep_form = list(self.S)

    def pool(self, x: str, window: dict) -> str:
        """The pooled value of the window value ``x`` (one per output element)."""
        if self.level.get(x) != "win":
            raise Unsupported("pool of a value that is not read in its window")
        v = self.new_var()
        self.level[v] = "full"
        self.stmts.append(Stmt(op="pool", kind=window["kind"], var=v, deps=[x], window=window))
        return v

    def lit(self, v: Any) -> str:
        """A literal of the accumulator type."""
        return lit(v, self.acc)

    def new_var(self) -> str:
        self._vars += 1
        return f"v{self._vars}"

    def out_map(self, shape: list[int]) -> list[int]:
        """Kernel dim of each dim of a value of ``shape`` (the group shape or a row shape)."""
        if shape == self.S:
            return list(range(self.rank))
        if self.rowwise and shape == self.keep_form:
            return list(range(self.rank))
        if self.rowwise and shape == self.drop_form:
            return self.nonR
        raise Unsupported(f"shape {shape} is neither the group shape {self.S} nor its row shape")

    def _row_view(self, sview: list[int]) -> bool:
        split = self.split
        return self.rowwise and all(sview[d] == 1 for d in range(self.rank)
                                            if d in self.Rset or (split and d == split[0]))

    def load(self, ref: str, sview: list[int], astrides: list[int]) -> str:
        """The variable holding input ``ref`` read with ``astrides`` (one load per operand)."""
        src = self.graph.node(ref)
        if src.dtype not in LOAD_DTYPES:
            raise Unsupported(f"{ref}: dtype {src.dtype} cannot be read by a generated kernel")
        lvl = "win" if self.side == "win" else "row" if self._row_view(sview) else "full"
        for i, o in enumerate(self.operands):
            if o.role == "in" and o.node == ref and o.strides == astrides:
                for s in self.stmts:
                    if s.op == "load" and s.operand == i and (s.level == "win") == (lvl == "win"):
                        return s.var
        idx = len(self.operands)
        self.operands.append(Operand(name=f"in{idx}", node=ref, dtype=src.dtype,
                                     shape=list(src.shape or []), strides=astrides, role="in"))
        v = self.new_var()
        self.stmts.append(Stmt(op="load", var=v, operand=idx, level=lvl))
        self.level[v] = lvl
        return v

    def raw_operand(self, ref: str) -> int:
        """An input the kernel indexes itself (a depthwise convolution's weights), contiguous."""
        src = self.graph.node(ref)
        if src.dtype not in LOAD_DTYPES or src.shape is None:
            raise Unsupported(f"{ref}: cannot be read by a generated kernel")
        self.operands.append(Operand(name=f"in{len(self.operands)}", node=ref, dtype=src.dtype,
                                     shape=list(src.shape), strides=[0] * self.rank, role="in"))
        return len(self.operands) - 1

    def tensor_arg(self, ref: str, out_shape: list[int]) -> str:
        """Variable for tensor ``ref`` broadcast to ``out_shape`` (a value of this node)."""
        src = self.graph.node(ref)
        if src.shape is None:
            raise Unsupported(f"{ref}: not a tensor")
        a_shape = list(src.shape)
        if len(a_shape) > len(out_shape):
            raise Unsupported(f"{ref}: broadcasts to a larger shape than its consumer")
        omap = self.out_map(out_shape)
        sview = [1] * self.rank
        astr = [0] * self.rank
        cst = contiguous_strides(a_shape)
        off = len(out_shape) - len(a_shape)
        for k, sz in enumerate(a_shape):
            od = off + k
            if sz != 1 and sz != out_shape[od]:
                raise Unsupported(f"{ref}: shape {a_shape} does not broadcast to {out_shape}")
            if sz != 1:
                sview[omap[od]] = sz
                astr[omap[od]] = cst[k]
        if ref in self.members:
            v = self.env[ref]
            if isinstance(v, tuple):
                raise Unsupported(f"{ref}: tuple value used directly")
            if (self.level[v] == "win") != (self.side == "win"):
                raise Unsupported(f"{ref}: a value before the pool is read after it")
            want = self.S if self.level[v] in ("full", "win") else self.keep_form
            if sview != want:
                raise Unsupported(f"{ref}: broadcasting inside the group does not follow its rows")
            return v
        return self.load(ref, sview, astr)

    def scalar_or_tensor(self, x: Any, out_shape: list[int]) -> str:
        r = node_ref(x)
        if r is not None:
            return self.tensor_arg(r, out_shape)
        if isinstance(x, (int, float, bool)):
            return self.lit(x)
        raise Unsupported(f"argument {x!r} is not a number or tensor")

    def emit(self, expr: str, deps: list[str], lvl: str | None = None, ctype: str = "") -> str:
        """A new variable computing ``expr``; per row unless a dependency is per element."""
        v = self.new_var()
        if lvl == "full" and self.side == "win":   # per element of the pool's window
            lvl = "win"
        if lvl is None:
            lvl = "win" if any(self.level.get(d) == "win" for d in deps) else \
                "full" if any(self.level.get(d) == "full" for d in deps) else "row"
        self.stmts.append(Stmt(op="expr", var=v, expr=expr, deps=deps, level=lvl, ctype=ctype))
        self.level[v] = lvl
        if ctype:
            self.ctypes[v] = ctype
        return v

    def reduce(self, kind: str, x: str, roles: list[str]) -> dict:
        """Row results ``{role: var}`` of reducing the per-element value ``x``."""
        if self.level.get(x) != "full":
            raise Unsupported("reduction of a value that is not per-element")
        outs = {}
        for r in roles:
            v = self.new_var()
            outs[r] = v
            self.level[v] = "row"
            if r == "idx":
                self.ctypes[v] = "long long"
        if any(s.op == "scan" for s in self.stmts):
            raise Unsupported("a scan shares its kernel with no reduction")
        self.stmts.append(Stmt(op="reduce", kind=kind, deps=[x], outs=outs, level="row"))
        return outs

    def scan(self, kind: str, x: str, reverse: bool = False) -> str:
        """The running ``kind`` (sum | prod) of the per-element value ``x`` along the row."""
        if self.level.get(x) != "full":
            raise Unsupported("scan of a value that is not per-element")
        if any(s.op in ("scan", "reduce") for s in self.stmts):
            raise Unsupported("a scan shares its kernel with no other scan or reduction")
        v = self.new_var()
        self.level[v] = "full"
        self.stmts.append(Stmt(op="scan", kind=kind, var=v, deps=[x], reverse=reverse))
        return v

    def full_input(self, n: Node) -> str:
        """The per-element variable of ``n``'s first argument."""
        ref = node_ref(n.args[0])
        if ref is None:
            raise Unsupported(f"{n.name}: input is not a tensor")
        v = self.tensor_arg(ref, self.S)
        if self.level[v] != ("win" if self.side == "win" else "full"):
            raise Unsupported(f"{n.name}: input is not per-element")
        return v

    def param(self, x: Any) -> str | None:
        """A norm's weight/bias/statistic: a per-channel [C] tensor is read along dim 1."""
        r = node_ref(x)
        if r is None:
            return None
        src = self.graph.node(r)
        view = [1] * self.rank
        strides = [0] * self.rank
        if len(src.shape) == 1 and self.rank >= 2 and src.shape[0] == self.S[1]:
            view[1], strides[1] = self.S[1], 1
        else:
            return self.tensor_arg(r, self.S)
        return self.load(r, view, strides)

    def outputs(self) -> dict[str, int]:
        """Output operands and stores for the values read outside the group: node -> operand."""
        users = self.graph.users()
        outputs: dict[str, int] = {}
        for n in self.nodes:
            v = self.env.get(n.name)
            outside = [u for u in users.get(n.name, []) if u not in self.members]
            if isinstance(v, tuple) or v is None:
                if outside:
                    raise Unsupported(f"{n.name}: tuple result used outside the group")
                continue
            if not outside:
                continue
            outputs[n.name] = self._store(n, v)
        if not outputs:
            raise Unsupported("the group has no outputs")
        for s in self.stmts:
            if s.op == "expr" and any(self.ctypes.get(d) == "long long" for d in s.deps):
                raise Unsupported("arithmetic on indices")
        return outputs

    def _store(self, n: Node, v: str) -> int:
        if n.shape is None:
            raise Unsupported(f"{n.name}: output without shape")
        if self.level[v] == "win":
            raise Unsupported(f"{n.name}: a value before the pool is read outside the group")
        if self.level[v] == "row" and self.split is not None:
            raise Unsupported(f"{n.name}: group-norm row value used outside")
        oshape = list(n.shape)
        if self.level[v] == "full" and oshape != self.S:
            raise Unsupported(f"{n.name}: output shape {oshape} differs from {self.S}")
        omap = self.out_map(oshape) if self.level[v] == "row" else list(range(self.rank))
        astr = [0] * self.rank
        cst = contiguous_strides(oshape)
        for k, sz in enumerate(oshape):
            if sz != 1:
                astr[omap[k]] = cst[k]
        idx = len(self.operands)
        dtype = n.dtype if n.dtype else "float32"
        if self.ctypes.get(v) == "long long":
            dtype = "int64"
        self.operands.append(Operand(name=f"out{idx}", node=n.name, dtype=dtype, shape=oshape,
                                     strides=astr, role="out"))
        self.stmts.append(Stmt(op="store", var=v, operand=idx, level=self.level[v], deps=[v]))
        return idx


VIEWS = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")


def split_views(graph: Graph, nhwc: set[str] | frozenset[str]) -> dict[str, list[int]]:
    """Views of tensors that will be channels-last (``nhwc``) splitting only their spatial
    dims, with the strides they then have (``layout.split_view_strides``): a kernel reads them
    where they lie, and the program takes them of the channels-last tensor itself."""
    out = {}
    for n in graph.calls():
        src = node_ref(n.args[0]) if n.target in VIEWS and n.args else None
        if src in nhwc and n.shape is not None and graph.node(src).shape is not None:
            strides = split_view_strides(list(graph.node(src).shape), list(n.shape))
            if strides is not None:
                out[n.name] = strides
    return out
