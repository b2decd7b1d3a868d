"""Pooling kernels (max, average and adaptive average pooling over 1-d, 2-d and 3-d windows)
and depthwise convolutions (a weighted sum over the same kind of window) for both backends.

A pooling group iterates the pooled output: one ``pool`` statement reads a window of its input
(kernel, stride, padding; dilation for max; ``count_include_pad`` and ``divisor_override`` for
the average; ``ceil_mode`` windows are clamped as torch clamps them; an adaptive average's
window of output ``o`` along a dim of ``I`` inputs and ``O`` outputs is
``[floor(o * I / O), ceil((o + 1) * I / O))``). The values before the
pool (its prologue: ``relu(x * s)``) are ``win`` values, computed inside the window loop for
each input element it reads; their operands' strides run over the input's dims (the output's
leading dims, then the input's spatial dims). The values after it (its epilogue) are per output
element. A depthwise convolution (one input and one output channel per group: MobileNet's and
EfficientNet's, KernelBench's ``conv_depthwise``) is a ``conv`` window: the taps of its output's
channel weigh the window's values (zero padding, stride, dilation), its bias is an epilogue
value. cuDNN and Inductor run it at a fraction of the memory bandwidth (a quarter to a third on
the H200), while it only needs to read its input and write its output once.

A *dense* convolution of few input channels on the GPU (``dense_form``: groups 1, 2-d, at most
16 input channels and ``DENSE_MAX_TAPS`` input channels x taps per output, KernelBench level
2's ``Conv2d`` of 8 input channels, a network's stem) is a ``conv`` window too, whose loop also
runs over the input channels (``cin``). cuDNN runs such a convolution NCHW in fp32 arithmetic, which is what makes
the reference exact to 1e-4 (a TF32 kernel, torch.compile's channels-last pick, is 5x the
tolerance away), and at a fraction of the FMA rate. On CUDA a thread computes ``px``
neighbouring outputs of a row for ``cot`` output channels held in registers, reading each input
row it needs once per input channel and kernel row and the block's weights from shared memory
as float4, with the epilogue applied before its one store (``dense_tile``).
The body is the same on both backends: C walks the outputs in parallel, CUDA gives each thread
one output (grid-stride), with 32-bit index math while every operand has fewer than 2^31
elements, and past that 64-bit math only for the flat index and the planes' offsets (one
division per output: the coordinates inside a plane stay 32-bit while a plane is below 2^31).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .codegen import Load, Store, elem_lines, offset, update
from .conv_tc import tc_lines, tc_tile
from .helpers import ceildiv, contiguous_strides, node_ref, round_up
from .layout import channels_last_strides
from .ir import KernelSpec, Stmt, Unsupported
from .passes import coalesce

if TYPE_CHECKING:
    from ...graph import Graph, Node

# aten op name -> (kind, spatial dims)
POOLS = {"max_pool1d": ("max", 1), "max_pool2d": ("max", 2), "max_pool3d": ("max", 3),
         "avg_pool1d": ("avg", 1), "avg_pool2d": ("avg", 2), "avg_pool3d": ("avg", 3),
         "adaptive_avg_pool1d": ("adaptive", 1), "adaptive_avg_pool2d": ("adaptive", 2),
         "adaptive_avg_pool3d": ("adaptive", 3)}
# convolution ops that can be a depthwise window (``depthwise_form``): their argument names
CONVS = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "convolution": 0, "_convolution": 0}
_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_CONVOLUTION_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed",
                     "output_padding", "groups")
# input channels x kernel taps per output up to which a dense convolution is a kernel of ours on
# the GPU: 8 channels of 3x3 (72), 16 of 3x3 (144), a stem's 3 channels of 7x7 (147)
DENSE_MAX_TAPS = 160
DENSE_MAX_CHANNELS = 16   # ... and input channels
_ARGS = {"max": ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
         "avg": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                 "divisor_override")}


def _ints(n: Node, v: Any, nd: int, default: list[int] | None = None) -> list[int]:
    if v is None or v == []:
        if default is None:
            raise Unsupported(f"{n.name}: no kernel size")
        return default
    if isinstance(v, int):
        return [v] * nd
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v) and len(v) in (1, nd):
        return [int(x) for x in v] * (nd if len(v) == 1 else 1)
    raise Unsupported(f"{n.name}: window argument {v!r}")


def pool_window(n: Node, graph: Graph) -> dict:
    """The window of a pooling node: kind, spatial dims ``nd``, input sizes ``in``, kernel
    ``k``, stride ``s``, padding ``p``, dilation ``d``, ``include_pad`` and ``divisor``."""
    kind, nd = POOLS[n.opname]
    ref = node_ref(n.args[0])
    x = graph.node(ref) if ref is not None else None
    if x is None or x.shape is None or n.shape is None or len(x.shape) not in (nd + 1, nd + 2) \
            or len(n.shape) != len(x.shape):
        raise Unsupported(f"{n.name}: input of rank other than {nd + 1} or {nd + 2}")
    if kind == "adaptive":
        one = [1] * nd
        return {"kind": "avg", "adaptive": True, "nd": nd, "in": list(x.shape[-nd:]),
                "k": one, "s": one, "p": [0] * nd, "d": one, "include_pad": False, "divisor": 0}
    a = dict(zip(_ARGS[kind], n.args[1:]))
    a.update(n.kwargs)
    k = _ints(n, a.get("kernel_size"), nd)
    s = _ints(n, a.get("stride"), nd, k)
    p = _ints(n, a.get("padding"), nd, [0] * nd)
    d = _ints(n, a.get("dilation"), nd, [1] * nd) if kind == "max" else [1] * nd
    div = a.get("divisor_override")
    if div is not None and not isinstance(div, int):
        raise Unsupported(f"{n.name}: divisor_override {div!r}")
    if list(x.shape[:-nd]) != list(n.shape[:-nd]) or min(k + s + d) < 1 or min(p) < 0:
        raise Unsupported(f"{n.name}: window {k}, stride {s}, padding {p}")
    return {"kind": kind, "nd": nd, "in": list(x.shape[-nd:]), "k": k, "s": s, "p": p, "d": d,
            "include_pad": a.get("count_include_pad", True) is not False, "divisor": div or 0}


def conv_args(n: Node) -> dict:
    """A convolution node's arguments by name (the ``conv2d`` and ``convolution`` forms)."""
    names = _CONVOLUTION_ARGS if CONVS[n.opname] == 0 else _CONV_ARGS
    a = dict(zip(names, n.args))
    a.update(n.kwargs)
    return a


def _conv_nd(n: Node, a: dict) -> int:
    nd = CONVS[n.opname]
    if nd == 0:
        st = a.get("stride")
        nd = len(st) if isinstance(st, (list, tuple)) else 0
    return nd


def depthwise_form(n: Node) -> bool:
    """A convolution with as many groups as output channels (more than one), not transposed:
    a window op whether or not each group reads one input channel (``conv_window`` checks)."""
    if n.opname not in CONVS or n.shape is None:
        return False
    a = conv_args(n)
    nd, g = _conv_nd(n, a), a.get("groups", 1)
    return 1 <= nd <= 3 and len(n.shape) in (nd + 1, nd + 2) and isinstance(g, int) and g > 1 \
        and not a.get("transposed", False) and n.shape[-nd - 1] == g


def dense_form(n: Node, graph: Graph) -> bool:
    """A 2-d convolution of one group (not transposed, batched) with a window larger than
    1x1 and at most ``DENSE_MAX_CHANNELS`` input channels and ``DENSE_MAX_TAPS`` input
    channels x taps per output, in a graph traced for the GPU: a window op (``conv_window``
    checks the rest). On the CPU oneDNN keeps it."""
    if n.opname not in CONVS or n.shape is None or len(n.shape) != 4 \
            or not str(graph.device).startswith("cuda"):
        return False
    a = conv_args(n)
    if _conv_nd(n, a) != 2 or a.get("groups", 1) != 1 or a.get("transposed", False):
        return False
    wr = node_ref(a.get("weight"))
    w = graph.node(wr) if wr else None
    # a 1x1 convolution is a GEMM over the channels (cuDNN's, on TF32 tensor cores with
    # enough of them), not a window
    return w is not None and w.shape is not None and len(w.shape) == 4 \
        and w.shape[1] <= DENSE_MAX_CHANNELS and math.prod(w.shape[2:]) > 1 \
        and math.prod(w.shape[1:]) <= DENSE_MAX_TAPS


def conv_window(n: Node, graph: Graph) -> tuple[dict, str, str | None]:
    """(window, weight node, bias node or None) of a depthwise or a dense convolution
    (``dense_form``): the window as ``pool_window`` gives it, kind ``conv``, with the number of
    output ``channels``; a dense one's ``cin`` input channels and its input's ``lead`` dims
    (batch, channels)."""
    a = conv_args(n)
    nd = _conv_nd(n, a)
    xr, wr, br = node_ref(a.get("input")), node_ref(a.get("weight")), node_ref(a.get("bias"))
    x = graph.node(xr) if xr else None
    w = graph.node(wr) if wr else None
    if x is None or w is None or wr is None or x.shape is None or w.shape is None \
            or n.shape is None or len(x.shape) != len(n.shape):
        raise Unsupported(f"{n.name}: input or weights of unknown shape")
    C = x.shape[-nd - 1]
    dense = dense_form(n, graph)
    if dense:
        if list(w.shape[:2]) != [n.shape[-nd - 1], C] or len(w.shape) != nd + 2:
            raise Unsupported(f"{n.name}: weights {w.shape} do not match the input's {C} "
                              f"channels")
    elif C != a["groups"] or list(w.shape[:2]) != [C, 1] or len(w.shape) != nd + 2:
        raise Unsupported(f"{n.name}: a grouped convolution with more than one input channel per "
                          f"group (weights {w.shape}) stays in the library")
    if w.stride is not None and list(w.stride) != contiguous_strides(list(w.shape)):
        raise Unsupported(f"{n.name}: weights not contiguous")
    k = [int(v) for v in w.shape[2:]]
    s = _ints(n, a.get("stride"), nd, [1] * nd)
    d = _ints(n, a.get("dilation"), nd, [1] * nd)
    pad = a.get("padding", 0)
    if pad == "valid":
        p = [0] * nd
    elif pad == "same":   # torch pads the odd element after: the bounds check covers it
        p = [d[q] * (k[q] - 1) // 2 for q in range(nd)]
    else:
        p = _ints(n, pad, nd, [0] * nd)
    if min(s + d) < 1 or min(p) < 0:
        raise Unsupported(f"{n.name}: stride {s}, padding {p}, dilation {d}")
    ins = list(x.shape[-nd:])
    want = [(ins[q] + 2 * p[q] - d[q] * (k[q] - 1) - 1) // s[q] + 1 for q in range(nd)]
    if pad != "same" and want != list(n.shape[-nd:]):
        raise Unsupported(f"{n.name}: output {n.shape} is not the window's {want}")
    window = {"kind": "conv", "nd": nd, "in": ins, "k": k, "s": s, "p": p, "d": d,
              "include_pad": False, "divisor": 0, "channels": int(n.shape[-nd - 1])}
    if dense:
        window.update(cin=int(C), lead=[int(v) for v in x.shape[:-nd]])
    return window, wr, br


def pool_stmt(spec: KernelSpec) -> Stmt | None:
    """The group's pool statement (lowering allows one per group), or None."""
    return next((s for s in spec.stmts if s.op == "pool"), None)


def index_type(spec: KernelSpec) -> str:
    """``int`` while every operand and the output have fewer than 2^31 elements."""
    small = spec.numel < 2 ** 31 and all(math.prod(o.shape) < 2 ** 31 for o in spec.operands)
    return "int" if small else "long long"


def _closure(spec: KernelSpec, roots: list[str], stop: set[str]) -> list[Stmt]:
    """Loads and expressions needed for ``roots`` (in order), without ``stop``."""
    need, stack = set(), list(roots)
    while stack:
        v = stack.pop()
        if v in need or v in stop:
            continue
        need.add(v)
        for s in spec.stmts:
            if s.var == v and s.op in ("load", "expr"):
                stack.extend(s.deps)
    return [s for s in spec.stmts if s.op in ("load", "expr") and s.var in need]


class _Pool:
    """One output element: its coordinates, the window loop over the prologue, the epilogue."""

    def __init__(self, spec: KernelSpec, load: Load, store: Store, it: str) -> None:
        self.spec, self.load, self.store, self.it = spec, load, store, it
        self.sf = "LL" if it == "long long" else ""
        s = pool_stmt(spec)
        assert s is not None
        self.s, self.w = s, s.window
        win = {t.var for t in spec.stmts if t.level == "win"}
        self.pre = _closure(spec, [s.deps[0]], set())
        self.stores = [t for t in spec.stmts if t.op == "store"]
        self.post = _closure(spec, [t.var for t in self.stores], win | {s.var})
        self.win_ops = sorted({t.operand for t in spec.stmts
                               if t.op == "load" and t.level == "win"})
        # the type of coordinates inside a plane (the spatial dims): 32-bit while the planes
        # of the output and of the pooled input are below 2^31 elements
        nd = self.w["nd"]
        small = max(math.prod(spec.dims[len(spec.dims) - nd:]), math.prod(self.w["in"])) < 2 ** 31
        self.sp, self.ss = ("int", "") if small else (it, self.sf)

    def _at_out(self, o) -> str:
        dims = self.spec.dims
        if self.spec.channels_inner and o.strides == [
                st if d != 1 else 0 for st, d in zip(channels_last_strides(dims), dims)]:
            return "p_f"   # laid out as the outputs are walked
        if all(a == b or d == 1 for a, b, d in zip(o.strides, contiguous_strides(dims), dims)):
            return "p_i"
        return offset(o.strides, dims, "p_i", list(range(len(dims))), self.sf)

    def _at_win(self, o) -> str:
        r, nd = len(self.spec.dims), self.w["nd"]
        st = [o.strides[r - nd + q] for q in range(nd)]
        terms = [f"w_{o.name}"] + [f"p_x{q}" if st[q] == 1 else f"p_x{q} * {st[q]}{self.sf}"
                                   for q in range(nd) if st[q]]
        return " + ".join(terms)

    def lines(self, ind: str) -> list[str]:
        spec, w, it, sf, acc = self.spec, self.w, self.it, self.sf, self.spec.acc
        nd, kind = w["nd"], w["kind"]
        sp, ss = self.sp, self.ss
        if spec.channels_inner:   # channels-last: the outputs walked in memory order
            L = self._channels_inner_lines(ind)
        else:
            L = [f"{ind}const {it} p_i = ({it})i;"] + self._nchw_lines(ind)
        L += self._plane_lines(ind)
        for q in range(nd if not w.get("adaptive") else 0):
            L.append(f"{ind}const {sp} p_s{q} = p_o{q} * {w['s'][q]}{ss} - {w['p'][q]}{ss};")
        L.append(f"{ind}{acc} p_a = {'-(' + acc + ')SC_INF' if kind == 'max' else '0'};")
        deep = ind
        if kind == "avg":
            L += self._avg_bounds(ind)
        cin = w.get("cin", 0)
        if cin:   # a dense convolution: the window runs over every input channel too
            L.append(f"{ind}for (int p_c = 0; p_c < {cin}; ++p_c) {{")
            deep += "    "
            L += self._win_offsets(deep, f"p_n * {cin}{sf} + p_c")
        top = deep
        for q in range(nd):
            if kind == "avg":
                L.append(f"{deep}for ({sp} p_x{q} = p_lo{q}; p_x{q} < p_hi{q}; ++p_x{q}) {{")
            else:
                L.append(f"{deep}for (int p_k{q} = 0; p_k{q} < {w['k'][q]}; ++p_k{q}) {{")
                L.append(f"{deep}    const {sp} p_x{q} = p_s{q} + p_k{q} * {w['d'][q]}{ss};")
                L.append(f"{deep}    if (p_x{q} < 0 || p_x{q} >= {w['in'][q]}{ss}) continue;")
            deep += "    "
        L += elem_lines(spec, self.pre, self.load, self._at_win, ind=deep)
        x = self.s.deps[0]
        if kind == "max":
            L.append(deep + update("max", "p_a", x, "", acc))
        elif kind == "conv":
            tap = "p_k0"
            for q in range(1, nd):
                tap = f"({tap}) * {w['k'][q]} + p_k{q}"
            if cin:
                tap = f"p_c * {math.prod(w['k'])} + {tap}"
            wt = self.load(spec.operands[w["weight"]], f"p_wb + {tap}", acc)
            L.append(f"{deep}p_a += {x} * {wt};")
        else:
            L.append(f"{deep}p_a += {x};")
        for q in reversed(range(nd)):
            L.append(top + "    " * q + "}")
        if cin:
            L.append(ind + "}")
        v = self.s.var
        if kind == "avg":
            L.append(f"{ind}const {acc} {v} = p_n > 0 ? p_a / ({acc})p_n : ({acc})0;")
        else:
            L.append(f"{ind}const {acc} {v} = p_a;")
        return L + self._out_lines(ind)

    def _nchw_lines(self, ind: str) -> list[str]:
        """Given the flat index ``p_i``: the output's spatial coordinates and the plane."""
        dims, nd, it, sf, sp, ss = self.spec.dims, self.w["nd"], self.it, self.sf, self.sp, self.ss
        r = len(dims)
        if sp == it:
            L = [f"{ind}{it} p_t = p_i;"]
            rem = "p_t"
        else:   # one 64-bit division to the plane, 32-bit math inside it
            plane = math.prod(dims[r - nd:])
            L = [f"{ind}const {it} p_t = p_i / {plane}{sf};",
                 f"{ind}{sp} p_r = ({sp})(p_i - p_t * {plane}{sf});"]
            rem = "p_r"
        for q in reversed(range(nd)):
            D = dims[r - nd + q]
            L.append(f"{ind}const {sp} p_o{q} = {rem} % {D}{ss}; {rem} /= {D}{ss};")
        return L

    def _channels_inner_lines(self, ind: str) -> list[str]:
        """The coordinates of output ``i`` counted channel innermost (``p_f``, its place in
        a channels-last output), the plane (batch, channel) in ``p_t`` and the NCHW flat
        index in ``p_i``, as the rest of the pool reads them."""
        spec, it, sf, sp, ss = self.spec, self.it, self.sf, self.sp, self.ss
        dims, nd = spec.dims, self.w["nd"]
        r, C = len(dims), dims[1]
        L = [f"{ind}const {it} p_f = ({it})i;",
             f"{ind}{it} p_t = p_f / {C}{sf};",
             f"{ind}const {it} p_ch = p_f - p_t * {C}{sf};"]
        for q in reversed(range(nd)):
            D = dims[r - nd + q]
            L.append(f"{ind}const {sp} p_o{q} = ({sp})(p_t % {D}{sf}); p_t /= {D}{sf};")
        L.append(f"{ind}p_t = p_t * {C}{sf} + p_ch;   // the plane: (batch, channel)")
        flat = "p_o0"
        for q in range(1, nd):
            flat = f"({flat}) * {dims[r - nd + q]}{ss} + p_o{q}"
        plane = math.prod(dims[r - nd:])
        L.append(f"{ind}const {it} p_i = p_t * {plane}{sf} + ({it})({flat});")
        return L

    def _plane_lines(self, ind: str) -> list[str]:
        """Given ``p_t``, the plane (the leading dims' flat index): each window operand's
        offset of it (leading dims walked contiguously merged) and, for a depthwise
        convolution, ``p_wb``, where its channel's taps start."""
        w, it, sf = self.w, self.it, self.sf
        if w.get("cin"):   # the batch index; the offsets come per input channel
            ch = w["channels"]
            return [f"{ind}const {it} p_n = p_t / {ch}{sf};",
                    f"{ind}const {it} p_wb = (p_t % {ch}{sf}) * "
                    f"{w['cin'] * math.prod(w['k'])}{sf};"]
        L = self._win_offsets(ind, "p_t")
        if w["kind"] == "conv":
            L.append(f"{ind}const {it} p_wb = (p_t % {w['channels']}{sf}) * "
                     f"{math.prod(w['k'])}{sf};")
        return L

    def _win_offsets(self, ind: str, plane: str) -> list[str]:
        """Each window operand's offset of the input plane ``plane`` (the flat index over the
        input's leading dims, walked contiguously merged): the output's own for a pool or a
        depthwise convolution, (batch, input channel) for a dense one."""
        spec, w, it, sf = self.spec, self.w, self.it, self.sf
        lead = len(spec.dims) - w["nd"]
        dims = w.get("lead") or spec.dims[:lead]
        idx = plane if plane.isidentifier() else f"({plane})"
        L = []
        for i in self.win_ops:
            o = spec.operands[i]
            ld, _, (lst,) = coalesce(dims, [False] * lead, [o.strides[:lead]])
            L.append(f"{ind}const {it} w_{o.name} = "
                     f"{offset(lst, ld, idx, list(range(len(ld))), sf)};")
        return L

    def _out_lines(self, ind: str, at=None) -> list[str]:
        """Given ``p_i`` and the window's value: the epilogue and the stores of one output;
        ``at``: the operands' index from the output's coordinates (``_at_tile``)."""
        spec, ops, at = self.spec, self.spec.operands, at or self._at_out
        return elem_lines(spec, self.post, self.load, at, ind=ind) + [
            ind + self.store(ops[t.operand], at(ops[t.operand]), t.var)
            for t in self.stores]

    def _at_tile(self, o) -> str:
        """A dense tile's operand index from its output's coordinates (``p_n``, the channel
        ``p_co0 + p_cc``, ``p_oh``, ``p_ow0 + p_p``), not from the flat index: a bias read
        per channel was a division and a remainder per output (64 a thread), and by the
        coordinates it is one load per channel, hoisted out of the row's outputs."""
        return self._at_coords(o, ["p_n", "(p_co0 + p_cc)", "p_oh", "(p_ow0 + p_p)"])

    def _at_coords(self, o, coords: list[str]) -> str:
        """An operand's index from the output's coordinates ``coords`` (4-d)."""
        if self._at_out(o) == "p_i":   # laid out as the output: its flat index
            return "p_i"
        dims = self.spec.dims
        terms = [c if st == 1 else f"({self.it}){c} * {st}{self.sf}"
                 for c, st, d in zip(coords, o.strides, dims) if st and d > 1]
        return " + ".join(terms) if terms else "0"

    def tiled_lines(self, t: dict) -> list[str]:
        """A 2-d depthwise convolution, a tile of output rows per block (``conv_tile``)."""
        spec, w, it, sf, acc = self.spec, self.w, self.it, self.sf, self.spec.acc
        dims = spec.dims
        (OH, OW), (H, W) = dims[-2:], w["in"]
        k, st, p, d = w["k"], w["s"], w["p"], w["d"]
        K, SW, TH = k[0] * k[1], t["width"], t["rows"]
        n_in, ntiles = t["in_rows"] * SW, t["planes"] * t["per_plane"]
        i1, i2, i3 = " " * 8, " " * 12, " " * 16
        L = [f"    __shared__ {acc} p_tile[{n_in}];",
             f"    for (long long p_b = blockIdx.x; p_b < {ntiles}LL; p_b += gridDim.x) {{",
             f"{i1}const {it} p_t = ({it})(p_b / {t['per_plane']}LL);",
             f"{i1}const int p_oh0 = (int)(p_b % {t['per_plane']}LL) * {TH};"]
        L += self._plane_lines(i1)
        L += [f"{i1}{acc} p_w[{K}];",
              f"{i1}#pragma unroll",
              f"{i1}for (int p_q = 0; p_q < {K}; ++p_q) p_w[p_q] = "
              f"{self.load(spec.operands[w['weight']], 'p_wb + p_q', acc)};",
              f"{i1}__syncthreads();   // the previous tile is consumed",
              f"{i1}for (int p_e = threadIdx.x; p_e < {n_in}; p_e += blockDim.x) {{",
              f"{i2}const int p_x0 = p_oh0 * {st[0]} - {p[0]} + p_e / {SW};",
              f"{i2}const int p_x1 = p_e % {SW} - {p[1]};",
              f"{i2}{acc} p_v = 0;   // zero padding",
              f"{i2}if (p_x0 >= 0 && p_x0 < {H} && p_x1 >= 0 && p_x1 < {W}) {{"]
        L += elem_lines(spec, self.pre, self.load, self._at_win, ind=i3)
        L += [f"{i3}p_v = {self.s.deps[0]};", f"{i2}}}", f"{i2}p_tile[p_e] = p_v;", f"{i1}}}",
              f"{i1}__syncthreads();",
              f"{i1}for (int p_o = threadIdx.x; p_o < {TH * OW}; p_o += blockDim.x) {{",
              f"{i2}const int p_r = p_o / {OW};",
              f"{i2}const int p_o1 = p_o - p_r * {OW};",
              f"{i2}if (p_oh0 + p_r >= {OH}) break;   // the last tile of a plane",
              f"{i2}const {it} p_i = p_t * {OH * OW}{sf} + (p_oh0 + p_r) * {OW} + p_o1;",
              f"{i2}const {acc}* p_row = p_tile + p_r * {st[0] * SW} + p_o1 * {st[1]};",
              f"{i2}{acc} p_a = 0;",
              f"{i2}#pragma unroll",
              f"{i2}for (int p_k0 = 0; p_k0 < {k[0]}; ++p_k0) {{",
              f"{i3}#pragma unroll",
              f"{i3}for (int p_k1 = 0; p_k1 < {k[1]}; ++p_k1)",
              f"{i3}    p_a += p_row[p_k0 * {d[0] * SW} + p_k1 * {d[1]}] * "
              f"p_w[p_k0 * {k[1]} + p_k1];",
              f"{i2}}}",
              f"{i2}const {acc} {self.s.var} = p_a;"]
        return L + self._out_lines(i2) + [f"{i1}}}", "    }"]

    def dense_lines(self, t: dict) -> list[str]:
        """A 2-d dense convolution (``dense_tile``): a block's threads share ``cot`` output
        channels, whose weights it stages in shared memory ([input channel][tap][channel]);
        a thread computes ``px`` neighbouring outputs of one output row for each of them."""
        spec, w, it, sf, acc = self.spec, self.w, self.it, self.sf, self.spec.acc
        (OH, OW), (H, W) = spec.dims[-2:], w["in"]
        k, st, p, d = w["k"], w["s"], w["p"], w["d"]
        cin, co, cot, px = w["cin"], w["channels"], t["cot"], t["px"]
        taps = cin * k[0] * k[1]
        nw = taps * cot
        vec = acc == "float"   # four channels' weights a shared-memory read
        i1, i2, i3, i4, i5 = (" " * n for n in (8, 12, 16, 20, 24))
        wop = spec.operands[w["weight"]]
        L = [f"    __shared__ __align__(16) {acc} p_ws[{nw}];",
             f"    for (long long p_b = blockIdx.x; p_b < {t['blocks']}LL; p_b += gridDim.x) {{",
             f"{i1}const int p_co0 = (int)(p_b % {t['nco']}LL) * {cot};",
             f"{i1}const long long p_g = (p_b / {t['nco']}LL) * blockDim.x + threadIdx.x;",
             f"{i1}__syncthreads();   // the previous block's weights are consumed",
             f"{i1}for (int p_e = threadIdx.x; p_e < {nw}; p_e += blockDim.x) {{",
             f"{i2}const int p_oc = p_co0 + p_e % {cot};",
             f"{i2}p_ws[p_e] = p_oc < {co} ? "
             f"{self.load(wop, f'p_oc * {taps} + p_e / {cot}', acc)} : ({acc})0;",
             f"{i1}}}",
             f"{i1}__syncthreads();",
             f"{i1}if (p_g < {t['groups']}LL) {{",
             f"{i2}const int p_ow0 = (int)(p_g % {t['gw']}LL) * {px};",
             f"{i2}const long long p_q = p_g / {t['gw']}LL;",
             f"{i2}const int p_oh = (int)(p_q % {OH}LL);",
             f"{i2}const {it} p_n = ({it})(p_q / {OH}LL);",
             f"{i2}{acc} p_a[{cot}][{px}];",
             f"{i2}#pragma unroll",
             f"{i2}for (int p_u = 0; p_u < {cot * px}; ++p_u) p_a[p_u / {px}][p_u % {px}] = 0;",
             f"{i2}for (int p_c = 0; p_c < {cin}; ++p_c) {{"]
        L += self._win_offsets(i3, f"p_n * {cin}{sf} + p_c")
        L += [f"{i3}#pragma unroll",
              f"{i3}for (int p_k0 = 0; p_k0 < {k[0]}; ++p_k0) {{",
              f"{i4}const int p_x0 = p_oh * {st[0]} - {p[0]} + p_k0 * {d[0]};",
              f"{i4}if (p_x0 < 0 || p_x0 >= {H}) continue;   // zero padding",
              f"{i4}{acc} p_v[{t['span']}];",
              f"{i4}#pragma unroll",
              f"{i4}for (int p_j = 0; p_j < {t['span']}; ++p_j) {{",
              f"{i5}const int p_x1 = p_ow0 * {st[1]} - {p[1]} + p_j;",
              f"{i5}{acc} p_val = 0;",
              f"{i5}if (p_x1 >= 0 && p_x1 < {W}) {{"]
        L += elem_lines(spec, self.pre, self.load, self._at_win, ind=i5 + "    ")
        L += [f"{i5}    p_val = {self.s.deps[0]};",
              f"{i5}}}",
              f"{i5}p_v[p_j] = p_val;",
              f"{i4}}}",
              f"{i4}#pragma unroll",
              f"{i4}for (int p_k1 = 0; p_k1 < {k[1]}; ++p_k1) {{",
              f"{i5}const {acc}* p_wq = p_ws + ((p_c * {k[0]} + p_k0) * {k[1]} + p_k1) * {cot};"]
        if vec:
            L += [f"{i5}#pragma unroll",
                  f"{i5}for (int p_c4 = 0; p_c4 < {cot // 4}; ++p_c4) {{",
                  f"{i5}    const float4 p_w4 = reinterpret_cast<const float4*>(p_wq)[p_c4];",
                  f"{i5}    #pragma unroll",
                  f"{i5}    for (int p_p = 0; p_p < {px}; ++p_p) {{",
                  f"{i5}        const float p_xv = p_v[p_p * {st[1]} + p_k1 * {d[1]}];"]
            L += [f"{i5}        p_a[4 * p_c4 + {j}][p_p] += p_xv * p_w4.{c};"
                  for j, c in enumerate("xyzw")]
            L += [f"{i5}    }}", f"{i5}}}"]
        else:
            L += [f"{i5}#pragma unroll",
                  f"{i5}for (int p_cc = 0; p_cc < {cot}; ++p_cc) {{",
                  f"{i5}    const {acc} p_wv = p_wq[p_cc];",
                  f"{i5}    #pragma unroll",
                  f"{i5}    for (int p_p = 0; p_p < {px}; ++p_p)",
                  f"{i5}        p_a[p_cc][p_p] += p_v[p_p * {st[1]} + p_k1 * {d[1]}] * p_wv;",
                  f"{i5}}}"]
        L += [f"{i4}}}", f"{i3}}}", f"{i2}}}",
              f"{i2}#pragma unroll",
              f"{i2}for (int p_cc = 0; p_cc < {cot}; ++p_cc) {{",
              f"{i3}if (p_co0 + p_cc >= {co}) break;",
              f"{i3}#pragma unroll",
              f"{i3}for (int p_p = 0; p_p < {px}; ++p_p) {{",
              f"{i4}if (p_ow0 + p_p >= {OW}) break;",
              f"{i4}const {it} p_i = ((p_n * {co}{sf} + p_co0 + p_cc) * {OH}{sf} + p_oh) * "
              f"{OW}{sf} + p_ow0 + p_p;",
              f"{i4}const {acc} {self.s.var} = p_a[p_cc][p_p];"]
        return L + self._out_lines(i4, self._at_tile) + [f"{i3}}}", f"{i2}}}", f"{i1}}}",
                                                          "    }"]

    def _avg_bounds(self, ind: str) -> list[str]:
        """Torch's average window: its size counted to the padded edge, then clamped."""
        w, it, sf = self.w, self.it, self.sf
        L = []
        if w.get("adaptive"):
            dims = self.spec.dims
            for q in range(w["nd"]):
                n, o = w["in"][q], dims[len(dims) - w["nd"] + q]
                # in 64 bits whatever the index type: o * n passes 2^31 before o or n does
                L.append(f"{ind}const {it} p_lo{q} = ({it})((long long)p_o{q} * {n}LL / {o}LL);")
                L.append(f"{ind}const {it} p_hi{q} = ({it})((((long long)p_o{q} + 1) * {n}LL + "
                         f"{o - 1}LL) / {o}LL);")
            prod = " * ".join(f"(p_hi{q} - p_lo{q})" for q in range(w["nd"]))
            return L + [f"{ind}const {it} p_n = {prod};"]
        for q in range(w["nd"]):
            k, edge, n = w["k"][q], w["in"][q] + w["p"][q], w["in"][q]
            L.append(f"{ind}const {it} p_e{q} = p_s{q} + {k}{sf} < {edge}{sf} ? "
                     f"p_s{q} + {k}{sf} : {edge}{sf};")
            L.append(f"{ind}const {it} p_lo{q} = p_s{q} > 0 ? p_s{q} : 0;")
            L.append(f"{ind}const {it} p_hi{q} = p_e{q} < {n}{sf} ? p_e{q} : {n}{sf};")
        if w["divisor"]:
            n_expr = f"{w['divisor']}"
        elif w["include_pad"]:
            n_expr = " * ".join(f"(p_e{q} - p_s{q})" for q in range(w["nd"]))
        else:
            n_expr = " * ".join(f"(p_hi{q} > p_lo{q} ? p_hi{q} - p_lo{q} : 0)"
                                for q in range(w["nd"]))
        L.append(f"{ind}const {it} p_n = {n_expr};")
        return L


def pool_body_c(spec: KernelSpec, load: Load, store: Store) -> str:
    """C: the outputs in parallel, each window in order."""
    pl = _Pool(spec, load, store, "long long")
    L = ["    #pragma omp parallel for schedule(static)",
         f"    for (long long i = 0; i < {spec.numel}LL; ++i) {{"] + pl.lines(" " * 8) + ["    }"]
    return "\n".join(L) + "\n"


def pool_body_cuda(spec: KernelSpec, load: Load, store: Store, params: dict | None = None) -> str:
    """CUDA: a thread per output element (grid-stride loop); a 2-d depthwise convolution
    stages its input in shared memory a tile of rows at a time (``conv_tile``), a 2-d dense
    one gives each thread a tile of outputs (``dense_tile``)."""
    pl = _Pool(spec, load, store, index_type(spec))
    dense = dense_tile(spec, params)
    if dense is not None:
        lines = tc_lines(pl, dense) if dense.get("tc") else pl.dense_lines(dense)
        return "\n".join(lines) + "\n"
    tile = conv_tile(spec)
    if tile is not None:
        return "\n".join(pl.tiled_lines(tile)) + "\n"
    L = ["    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
         f"i < {spec.numel}LL; i += (long long)gridDim.x * blockDim.x) {{"]
    L += pl.lines(" " * 8) + ["    }"]
    return "\n".join(L) + "\n"


TILE_SMEM = 48 * 1024    # static shared memory a depthwise tile may take
TILE_OUTPUTS = 16 * 256  # outputs a tile aims for: 16 per thread of a 256-thread block


def conv_tile(spec: KernelSpec) -> dict | None:
    """The tile of a 2-d depthwise convolution on CUDA: a block computes ``rows`` output rows
    of one plane from the ``in_rows`` x ``width`` input values they need, staged (prologue
    applied, zero padding written out) in shared memory, so every input value is read from
    memory about once and the taps read shared memory with no bounds checks. None where the
    generic window loop runs instead (other windows, a row too wide for the tile, planes past
    2^31 elements)."""
    s = pool_stmt(spec)
    if s is None or s.window.get("kind") != "conv" or s.window["nd"] != 2:
        return None
    w = s.window
    (OH, OW), (H, W) = spec.dims[-2:], w["in"]
    k, st, d = w["k"], w["s"], w["d"]
    if max(OH * OW, H * W) >= 2 ** 31 or k[0] * k[1] > 64:   # taps held in registers
        return None
    width = (OW - 1) * st[1] + (k[1] - 1) * d[1] + 1
    span = (k[0] - 1) * d[0] + 1
    fit = TILE_SMEM // ((8 if spec.acc == "double" else 4) * width)
    if fit < span:
        return None
    rows = max(1, min(OH, (fit - span) // st[0] + 1, ceildiv(TILE_OUTPUTS, OW)))
    return {"rows": rows, "in_rows": (rows - 1) * st[0] + span, "width": width,
            "per_plane": ceildiv(OH, rows), "planes": math.prod(spec.dims[:-2])}


DENSE_SMEM = 48 * 1024   # static shared memory a dense convolution's weights may take


def dense_tile(spec: KernelSpec, params: dict | None = None) -> dict | None:
    """The tiling of a 2-d dense convolution on CUDA (``_Pool.dense_lines``): ``cot`` output
    channels a block (their weights in shared memory), ``px`` outputs of a row a thread, in
    registers (``cot * px`` accumulators: 32 for fp32 by default); ``blocks`` in all, the
    channel chunk the fastest, so that the blocks reading one stretch of input run together.
    None for other windows (the generic loop)."""
    s = pool_stmt(spec)
    if s is None or not s.window.get("cin") or s.window["nd"] != 2 or len(spec.dims) != 4:
        return None
    p = params or {}
    w = s.window
    tc = tc_tile(spec, w) if p.get("tc") else None
    if tc is not None:   # fp32 on tensor cores (conv_tc.py); else the SIMT tile below
        return tc
    size = 8 if spec.acc == "double" else 4
    taps = w["cin"] * math.prod(w["k"])
    # 16 x 4 fp32 accumulators, no spills (ptxas for sm_90): 128 registers a thread for 8
    # input channels of 3x3, 168 for a stem's 3 of 7x7; 32 x 4 takes 254, 64 x 4 spills
    cot = min(int(p.get("cot") or (16 if size == 4 else 8)), round_up(w["channels"], 4))
    cot = max(4, round_up(cot, 4))
    while cot > 4 and taps * cot * size > DENSE_SMEM:
        cot -= 4
    if taps * cot * size > DENSE_SMEM:
        return None
    # two outputs of a row a thread (32 accumulators): an H100 ran KernelBench's 3x3
    # convolutions of 8 input channels (128 x 64 x 254 x 254 and 128 x 64 x 126 x 126 outputs)
    # in 3.24 and 0.68 ms against 3.84 and 0.94 with four (a quarter of the warps were
    # active, waiting on their loads), 6.4 and 1.57 with eight
    px = max(1, int(p.get("px") or 2))
    block = int(p.get("block") or 128)
    N, _, OH, OW = spec.dims
    gw = ceildiv(OW, px)
    groups = N * OH * gw
    nco = ceildiv(w["channels"], cot)
    return {"cot": cot, "px": px, "gw": gw, "groups": groups, "nco": nco,
            "blocks": ceildiv(groups, block) * nco,
            "span": (px - 1) * w["s"][1] + (w["k"][1] - 1) * w["d"][1] + 1}
