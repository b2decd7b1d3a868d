"""C (OpenMP) source for a KernelSpec: the CPU target of the offline Coder.

Pointwise kernels walk the output in chunks (``#pragma omp parallel for``) and, inside a chunk,
rows of the innermost dim with a ``#pragma omp simd`` loop the compiler vectorises (restrict
pointers, unit or zero strides). Rowwise kernels run rows in parallel; each reduction is its own
simple loop (sum/max/min with ``omp simd reduction``; mean/variance as two exact passes;
softmax as max then sum of exp). Math helpers are branch-free float versions the vectoriser can
inline (exp/log to ~1 ulp, tanh, erf to ~1e-7), so chains with exp, tanh or GELU vectorise too.

Compiled by the runtime with ``cc -O3 -march=native -fno-trapping-math -fno-math-errno -fopenmp -shared -fPIC``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from .codegen import (REDUCTIONS, RowValues, elem_index, elem_lines, offset, row_bases,
                      row_dims, row_passes, update)
from .helpers import ceildiv
from .ir import KernelSpec, Operand, Stmt, deps_closure
from .launch import C_CHUNK
from .pool import pool_body_c
from .scan import scan_body_c, scan_stmt

# Rows from this long have their float sums (sum, mean, variance, softmax's denominator) added
# in double (``_RowKernel._sum``); shorter ones stay in float, a few hundred elements a lane.
SUM_IN_DOUBLE_FROM = 4096
# Rows side by side in one vector loop where rows are interleaved in memory (a reduction along
# a middle dim, ``_lanes``): up to a run of 1024 of them (4 KB of each operand read in one
# stretch per element, where 64 rows read 256 B a page apart), fewer where that would leave
# under MIN_LANE_BLOCKS blocks for the threads. Each lane adds its row one element at a time,
# so its float sums go to double from a shorter row.
MAX_LANES, MIN_LANES, MIN_LANE_BLOCKS = 1024, 64, 16
LANE_SUM_IN_DOUBLE_FROM = 512
# a row value's declaration, as the row kernel prints it: (type, name, value)
_DECL = re.compile(r"^\s*(?:const )?([A-Za-z_][\w ]*?) (v\w+) = (.+);$")

C_TYPES = {"float32": "float", "float64": "double", "float16": "_Float16",
           "bfloat16": "uint16_t", "bool": "uint8_t", "int64": "int64_t", "int32": "int32_t",
           "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t"}

# The log tests `x >= 0` for "negative or NaN": GCC 12 leaves a loop with `x < 0 || x != x`
# (an `||` between two masks) scalar. Comments in the prelude stay on one line each: a person
# editing a kernel may append to any line.
PRELUDE = r"""#ifndef SC_C_PRELUDE
#define SC_C_PRELUDE
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#pragma GCC optimize("no-math-errno")
#define SC_INF INFINITY
#define SC_NAN NAN
typedef union { float f; int32_t i; uint32_t u; } sc_bits;
static inline float sc_bf16_load(uint16_t h) { sc_bits b; b.u = (uint32_t)h << 16; return b.f; }
static inline uint16_t sc_bf16_store(float f) {
    sc_bits b; b.f = f;
    if ((b.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b.u >> 16) | 0x40u);
    return (uint16_t)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
}
static inline float sc_maxf(float a, float b) { return a > b ? a : b; }
static inline float sc_minf(float a, float b) { return a < b ? a : b; }
/* exp: Cody-Waite range reduction + degree-6 polynomial (~1 ulp), branch-free. */
static inline float sc_expf(float x) {
    float xc = x < -87.3f ? -87.3f : x;   /* clamped so, a NaN stays one */
    xc = xc > 88.7f ? 88.7f : xc;
    float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - k * 0.693145751953125f - k * 1.428606765330187045e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f; p = p * r + 8.3334519073e-3f; p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f; p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    sc_bits s; s.i = ((int32_t)k + 127) << 23;
    float y = p * s.f;
    y = x > 88.72f ? SC_INF : y;
    return x < -103.9f ? 0.0f : y;
}
/* log: exponent/mantissa split + Cephes polynomial (~1 ulp) for normal positive x. */
static inline float sc_logf(float x) {
    sc_bits b; b.f = x;
    int32_t e = ((b.i >> 23) & 0xff) - 126;
    b.i = (b.i & 0x007fffff) | 0x3f000000;
    float m = b.f;
    int32_t small = m < 0.707106781186547524f;
    e -= small;
    m = small ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f; y = y * m + 1.1676998740e-1f; y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f; y = y * m - 1.6668057665e-1f; y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f; y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    float fe = (float)e;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    float r = m + y + 0.693359375f * fe;
    r = x == SC_INF ? SC_INF : r;
    r = x == 0.0f ? -SC_INF : r;
    return x >= 0.0f ? r : SC_NAN;   /* negative or NaN, in one compare (see PRELUDE) */
}
static inline float sc_tanhf(float x) {
    float a = fabsf(x);
    float z = x * x;
    float p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
               + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float t = 1.0f - 2.0f / (sc_expf(2.0f * a) + 1.0f);
    t = x < 0.0f ? -t : t;
    return a < 0.625f ? p : t;
}
static inline float sc_sigmoidf(float x) { return 1.0f / (1.0f + sc_expf(-x)); }
/* erf: Abramowitz-Stegun 7.1.26 (abs error < 1.5e-7). */
static inline float sc_erff(float x) {
    float a = fabsf(x);
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t
                       - 0.284496736f) * t + 0.254829592f) * t * sc_expf(-a * a);
    return x < 0.0f ? -y : y;
}
static inline float sc_log1pf(float x) {
    float u = 1.0f + x;
    float r = sc_logf(u) - ((u - 1.0f) - x) / u;
    r = x == SC_INF ? x : r;
    r = u == 0.0f ? -SC_INF : r;
    return fabsf(x) < 1e-4f ? x - 0.5f * x * x : r;
}
static inline float sc_expm1f(float x) {
    float small = x + 0.5f * x * x + x * x * x * (1.0f / 6.0f);
    return fabsf(x) < 1e-3f ? small : sc_expf(x) - 1.0f;
}
static inline float sc_softplusf(float x) {
    float r = sc_log1pf(sc_expf(x));
    r = x < -20.0f ? sc_expf(x) : r;
    return x > 20.0f ? x : r;
}
static inline float sc_rsqrtf(float x) { return 1.0f / sqrtf(x); }
/* mish: x * tanh(log1p(e^x)) is x * n / (n + 2) with n = e^x (e^x + 2): one exp, no log
   or tanh; past 20, tanh(softplus(x)) rounds to 1 (NaN stays NaN, -inf gives ATen's NaN) */
static inline float sc_mishf(float x) {
    float e = sc_expf(x < 20.0f ? x : 20.0f);
    float n = e * (e + 2.0f);
    return x > 20.0f ? x : x * (n / (n + 2.0f));
}
static inline double sc_maxd(double a, double b) { return a > b ? a : b; }
static inline double sc_mind(double a, double b) { return a < b ? a : b; }
/* torch.maximum / minimum: a NaN on either side is the result (sc_max returns b for one in a) */
static inline float sc_maximumf(float a, float b) { return a != a ? a : (a > b ? a : b); }
static inline float sc_minimumf(float a, float b) { return a != a ? a : (a < b ? a : b); }
static inline double sc_maximumd(double a, double b) { return a != a ? a : (a > b ? a : b); }
static inline double sc_minimumd(double a, double b) { return a != a ? a : (a < b ? a : b); }
static inline double sc_softplusd(double x) { return x > 20.0 ? x : log1p(exp(x)); }
static inline double sc_mishd(double x) {
    double e = exp(x < 20.0 ? x : 20.0);
    double n = e * (e + 2.0);
    return x > 20.0 ? x : x * (n / (n + 2.0));
}
static inline double sc_rsqrtd(double x) { return 1.0 / sqrt(x); }
static inline double sc_sigmoidd(double x) { return 1.0 / (1.0 + exp(-x)); }
#define SC_F(fn, dfn, x) _Generic((x), float: fn, default: dfn)(x)
#define sc_exp(x) SC_F(sc_expf, exp, x)
#define sc_log(x) SC_F(sc_logf, log, x)
#define sc_tanh(x) SC_F(sc_tanhf, tanh, x)
#define sc_sigmoid(x) SC_F(sc_sigmoidf, sc_sigmoidd, x)
#define sc_erf(x) SC_F(sc_erff, erf, x)
#define sc_log1p(x) SC_F(sc_log1pf, log1p, x)
#define sc_expm1(x) SC_F(sc_expm1f, expm1, x)
#define sc_softplus(x) SC_F(sc_softplusf, sc_softplusd, x)
#define sc_mish(x) SC_F(sc_mishf, sc_mishd, x)
#define sc_rsqrt(x) SC_F(sc_rsqrtf, sc_rsqrtd, x)
#define sc_max(a, b) _Generic((a) + (b), float: sc_maxf, default: sc_maxd)(a, b)
#define sc_min(a, b) _Generic((a) + (b), float: sc_minf, default: sc_mind)(a, b)
#define sc_maximum(a, b) _Generic((a) + (b), float: sc_maximumf, default: sc_maximumd)(a, b)
#define sc_minimum(a, b) _Generic((a) + (b), float: sc_minimumf, default: sc_minimumd)(a, b)
#include <tgmath.h>
#endif
"""


def _ptr(o: Operand) -> str:
    t = C_TYPES[o.dtype]
    if o.role == "in":
        return f"const {t}* restrict {o.name}"
    return f"{t}* restrict {o.name}"


def _load(o: Operand, idx: str, acc: str) -> str:
    if o.dtype == "bfloat16":
        return f"({acc})sc_bf16_load({o.name}[{idx}])"
    return f"({acc}){o.name}[{idx}]"


def _store(o: Operand, idx: str, val: str) -> str:
    if o.dtype == "bfloat16":
        return f"{o.name}[{idx}] = sc_bf16_store((float)({val}));"
    if o.dtype == "bool":
        return f"{o.name}[{idx}] = (uint8_t)(({val}) != 0);"
    return f"{o.name}[{idx}] = ({C_TYPES[o.dtype]})({val});"


def emit_c(spec: KernelSpec, params: dict | None = None) -> str:
    """C source with one exported function named ``spec.name``."""
    params = params or {}
    if spec.kind == "pointwise":
        body = _pointwise(spec, params)
    elif spec.kind == "pool":
        body = pool_body_c(spec, _load, _store)
    elif scan_stmt(spec) is not None:
        body = scan_body_c(spec, _load, _store)
    else:
        body = _RowKernel(spec).body()
    sig = ", ".join(_ptr(o) for o in spec.operands)
    head = (f"/* {spec.name}: {', '.join(spec.ops)}\n"
            f"   dims {spec.dims} (reduced: {[d for d, r in zip(spec.dims, spec.reduce) if r]}),"
            f" {spec.acc} math */\n")
    return PRELUDE + "\n" + head + f"void {spec.name}({sig})\n{{\n" + body + "}\n"


def _pointwise(spec: KernelSpec, params: dict) -> str:
    dims = spec.dims
    n = spec.numel
    inner = dims[-1]
    chunk = int(params.get("chunk", C_CHUNK))
    nchunks = max(1, ceildiv(n, chunk))
    outer = list(range(len(dims) - 1))
    ops = spec.operands
    lines = ["    #pragma omp parallel for schedule(static)",
             f"    for (long long blk = 0; blk < {nchunks}LL; ++blk) {{",
             f"        const long long end = blk * {chunk}LL + {chunk}LL < {n}LL ? blk * {chunk}LL + {chunk}LL : {n}LL;",
             f"        long long i = blk * {chunk}LL;",
             "        while (i < end) {",
             f"            const long long r = i / {inner}LL, c0 = i % {inner}LL;",
             f"            const long long c1 = c0 + (end - i) < {inner}LL ? c0 + (end - i) : {inner}LL;"]
    for o in ops:
        lines.append(f"            const long long b_{o.name} = {offset(o.strides, dims, 'r', outer)};")

    def idx_of(o: Operand) -> str:
        st = o.strides[-1]
        return f"b_{o.name}" + ("" if st == 0 else " + c" if st == 1 else f" + c * {st}LL")

    # a value broadcast along the row is read once, before the loop: read inside it, GCC sinks
    # the read into the one branch of a select that uses it (PReLU's weight) and then cannot
    # vectorise a masked load of one address, so the loop stays scalar
    body = [s for s in spec.stmts if s.op in ("load", "expr")]
    fixed = [s for s in body if s.op == "load" and ops[s.operand].strides[-1] == 0]
    lines += elem_lines(spec, fixed, _load, idx_of, ind=" " * 12)
    lines.append("            #pragma omp simd")
    lines.append("            for (long long c = c0; c < c1; ++c) {")
    lines += elem_lines(spec, [s for s in body if s not in fixed], _load, idx_of, ind=" " * 16)
    for s in spec.stmts:
        if s.op == "store":
            lines.append(" " * 16 + _store(ops[s.operand], idx_of(ops[s.operand]), s.var))
    lines += ["            }", "            i += c1 - c0;", "        }", "    }"]
    return "\n".join(lines) + "\n"


def _row_split(spec: KernelSpec) -> tuple[list[int], list[int], int] | None:
    """(outer dims, inner dims, inner length) to walk a row as blocks of elements that every
    operand reads contiguously or not at all, where some operand reads the row itself as a
    gather: a batch norm's rows over N x H x W of an NCHW tensor, a group norm's weight that
    changes every H*W elements. One loop over j would index (j / HW) * CHW + j % HW, which
    GCC leaves scalar; a loop over the blocks with the vector loop inside reads plain runs.
    None where one loop is already plain, or the blocks would be shorter than 8 elements."""
    _, edims = row_dims(spec)
    flat = [offset(o.strides, spec.dims, "j", edims) for o in spec.operands]
    if all(f in ("0", "j") for f in flat):
        return None
    for k in range(1, len(edims)):
        outer, inner = edims[:k], edims[k:]
        length = math.prod(spec.dims[d] for d in inner)
        if length < 8:
            break
        if all(offset(o.strides, spec.dims, "ji", inner) in ("0", "ji") for o in spec.operands):
            return outer, inner, length
    return None


def _lanes(spec: KernelSpec) -> int:
    """Rows a C row kernel runs side by side (0: one row at a time). Where the last dim is
    kept (a reduction along a middle dim), element j of row r + 1 lies next to element j of
    row r: a vector loop across rows reads plain runs where one along a row reads a gather that
    GCC leaves scalar. Every operand must read that dim contiguously or not at all."""
    last = spec.dims[-1]
    if spec.reduce[-1] or last < 8:
        return 0
    if any(o.strides[-1] not in (0, 1) for o in spec.operands):
        return 0
    n = min(last, MAX_LANES)
    while n > MIN_LANES and spec.rows // last * ceildiv(last, n) < MIN_LANE_BLOCKS:
        n = max(MIN_LANES, n // 4)
    return n


class _RowKernel:
    """Rows in parallel; in each row, one simple loop per reduction (mean/variance as two
    exact passes, softmax as max then sum of exp), then the per-element outputs.

    With lanes (``_lanes``) a block of up to MAX_LANES neighbouring rows is one parallel step:
    each row value becomes an array over the block, and every loop over a row's elements has
    the vector loop across the block's rows inside it."""

    ind = " " * 8

    def __init__(self, spec: KernelSpec) -> None:
        self.spec, self.acc = spec, spec.acc
        self.lanes = _lanes(spec)
        self.rows = RowValues(spec, _load, _store)
        self.split = None if self.lanes else _row_split(spec)
        self.at_j: Callable[[Operand], str]
        if self.lanes:
            self.lines = self._lane_head()
        else:
            self.lines = ["    #pragma omp parallel for schedule(static)",
                          f"    for (long long r = 0; r < {spec.rows}LL; ++r) {{"]
        self.lines += row_bases(spec, self.ind)
        self.lane_vars: set[str] = set()    # row values held as arrays over the lanes
        self.pending: list[str] = []        # row lines waiting for their loop over the lanes
        if self.split:
            outer, inner, _ = self.split

            def at(o: Operand) -> str:
                off = " + ".join(t for t in (offset(o.strides, spec.dims, "jo", outer),
                                             offset(o.strides, spec.dims, "ji", inner))
                                 if t != "0")
                return f"b_{o.name}" + (f" + {off}" if off else "")
            self.at_j = at
        else:
            self.at_j = elem_index(spec, "j")

    def _lane_head(self) -> list[str]:
        """The parallel loop over blocks of neighbouring rows: ``r`` is the block's first row,
        ``nl`` its number of rows (the last block of each run of the last dim may be short)."""
        last, n = self.spec.dims[-1], self.lanes
        blocks = ceildiv(last, n)
        first = f"(rt % {blocks}LL) * {n}LL"
        lines = ["    #pragma omp parallel for schedule(static)",
                 f"    for (long long rt = 0; rt < {self.spec.rows // last * blocks}LL; ++rt) {{",
                 f"{self.ind}const long long r = rt * {last}LL;" if blocks == 1 else
                 f"{self.ind}const long long r = (rt / {blocks}LL) * {last}LL + {first};"]
        if last % n:
            lines.append(f"{self.ind}const long long nl = {last}LL - {first} < {n}LL ? "
                         f"{last}LL - {first} : {n}LL;")
        else:
            lines.append(f"{self.ind}const long long nl = {n}LL;")
        return lines

    def body(self) -> str:
        spec, ops = self.spec, self.spec.operands
        self._flush_rows()
        for _, reds, stores in row_passes(spec):
            for s in reds:
                self._reduce(s)
                self.rows.avail.update(s.outs.values())
            self._flush_rows()
            # the last pass writes the per-element outputs
            if stores:
                self._elem_loop([s.var for s in stores],
                                [_store(ops[s.operand], self.at_j(ops[s.operand]), s.var)
                                 for s in stores], "#pragma omp simd")
        self._lane_loop()
        self.lines.append("    }")
        return "\n".join(self.lines) + "\n"

    # -- row values: scalars, or arrays over the lanes -----------------------------------------

    def _row(self, line: str) -> None:
        """One statement of the row (not of an element loop): printed as it is, or with lanes,
        its value declared as an array and the statement kept for the next loop over them."""
        if not self.lanes:
            self.lines.append(line)
            return
        m = _DECL.match(line)
        if m:
            ctype, name, value = m.groups()
            self.lines.append(f"{self.ind}{ctype} {name}[{self.lanes}];")
            self.lane_vars.add(name)
            line = f"{self.ind}{name} = {value};"
        self.pending.append(self._in_lane(line))

    def _flush_rows(self) -> None:
        out: list[str] = []
        self.rows.flush(out, self.ind)
        for line in out:
            self._row(line)

    def _in_lane(self, line: str) -> str:
        """``line`` for lane ``ln``: row values indexed by it, each operand's row base moved to
        that lane's row (operands that do not vary along the last dim keep theirs)."""
        line = re.sub(r"\b(v\w+)\b",
                      lambda m: f"{m.group(1)}[ln]" if m.group(1) in self.lane_vars else m.group(1),
                      line)
        for o in self.spec.operands:
            if o.strides[-1]:
                line = re.sub(rf"\bb_{o.name}\b", f"(b_{o.name} + ln)", line)
        return line

    def _lane_loop(self) -> None:
        """The loop over the lanes of the row statements kept so far."""
        if self.pending:
            self.lines += [f"{self.ind}#pragma omp simd",
                           f"{self.ind}for (long long ln = 0; ln < nl; ++ln) {{"]
            self.lines += ["    " + line for line in self.pending]
            self.lines.append(self.ind + "}")
            self.pending = []

    def _elem_loop(self, roots: list[str], tail: list[str], pragma: str = "") -> None:
        """One loop over the row's elements (``j``) computing what ``roots`` need, then
        ``tail``."""
        need = [s for s in deps_closure(self.spec, roots) if s.var not in self.rows.avail]
        heads, depth = self._loop_heads(pragma)
        ind = self.ind + "    " * depth
        body = (elem_lines(self.spec, need, _load, self.at_j, ind=ind)
                + [ind + t for t in tail])
        if self.lanes:
            body = [self._in_lane(line) for line in body]
        self.lines += heads + body + [self.ind + "    " * k + "}" for k in reversed(range(depth))]

    def _loop_heads(self, pragma: str) -> tuple[list[str], int]:
        """The headers of a loop over a row's elements and how deep its body sits: one loop;
        a loop over the runs with the vector loop inside (``_row_split``); or, with lanes, the
        elements one after another and the lanes' rows as the vector loop inside."""
        ind, length = self.ind, self.spec.rowlen
        if self.lanes:
            self._lane_loop()
            return [f"{ind}for (long long j = 0; j < {length}LL; ++j) {{",
                    f"{ind}    #pragma omp simd",
                    f"{ind}    for (long long ln = 0; ln < nl; ++ln) {{"], 2
        if self.split:
            inner = self.split[2]
            return ([f"{ind}for (long long jo = 0; jo < {length // inner}LL; ++jo) {{"]
                    + ([f"{ind}    {pragma}"] if pragma else [])
                    + [f"{ind}    for (long long ji = 0; ji < {inner}LL; ++ji) {{",
                       f"{ind}        const long long j = jo * {inner}LL + ji;"]), 2
        return (([ind + pragma] if pragma else [])
                + [f"{ind}for (long long j = 0; j < {length}LL; ++j) {{"]), 1

    def _sum(self, v: str, x: str, term: str) -> None:
        """``acc v`` = the row's sum of ``term`` (per element of ``x``). A long float row is
        summed in double: each of the loop's vector lanes adds a long run of it one by one,
        whose float rounding grows with its length (a batch norm over 2M elements a channel
        had its variance 1e-3 off, ten times its fp32 tolerance)."""
        ind, acc, w = self.ind, self.acc, self._row
        long_from = LANE_SUM_IN_DOUBLE_FROM if self.lanes else SUM_IN_DOUBLE_FROM
        if acc == "float" and self.spec.rowlen >= long_from:
            w(f"{ind}double {v}_d = 0;")
            self._elem_loop([x], [f"{v}_d += (double)({term});"],
                            f"#pragma omp simd reduction(+:{v}_d)")
            w(f"{ind}const {acc} {v} = ({acc}){v}_d;")
            return
        w(f"{ind}{acc} {v} = 0;")
        self._elem_loop([x], [f"{v} += {term};"], f"#pragma omp simd reduction(+:{v})")

    def _reduce(self, s: Stmt) -> None:
        ind, acc, L, w = self.ind, self.acc, self.spec.rowlen, self._row
        x, o, red = s.deps[0], s.outs, REDUCTIONS[s.kind]
        if s.kind == "sum":
            self._sum(next(iter(o.values())), x, x)
        elif s.kind in ("prod", "max", "min"):
            v = next(iter(o.values()))
            w(f"{ind}{acc} {v} = {red.c_init};")
            pragma = f"#pragma omp simd reduction({red.c_omp}:{v})" if red.c_omp else ""
            self._elem_loop([x], [update(s.kind, v, x, "j", acc)], pragma)
        elif s.kind in ("argmax", "argmin"):
            w(f"{ind}{acc} {o['val']} = {red.c_init};")
            w(f"{ind}long long {o['idx']} = -1;")
            self._elem_loop([x], [update(s.kind, "", x, "j", acc, val=o["val"], idx=o["idx"])])
        elif s.kind == "welford":
            mean, m2 = o["mean"], o["m2"]
            tot = f"{mean}_sum"
            self._sum(tot, x, x)
            w(f"{ind}const {acc} {mean} = {tot} / ({acc}){L};")
            self.rows.avail.add(mean)
            self._sum(m2, x, f"({x} - {mean}) * ({x} - {mean})")
        elif s.kind == "softmax":
            m, sm = o["m"], o["s"]
            w(f"{ind}{acc} {m} = -SC_INF;")
            self._elem_loop([x], [f"{m} = {x} > {m} ? {x} : {m};"],
                            f"#pragma omp simd reduction(max:{m})")
            self.rows.avail.add(m)
            # -inf adds nothing; a NaN adds NaN, also in a row of nothing else (m = -inf);
            # a row whose max is +inf sums exp(x - the largest finite value): +inf, not the
            # NaN of inf - inf, so its logsumexp is +inf (the softmaxes read m = +inf as NaN).
            # Once a row, not a select per element (a fifth of the vectorised sum's speed)
            top = "DBL_MAX" if acc == "double" else "FLT_MAX"
            w(f"{ind}const {acc} {m}_top = {m} < {top} ? {m} : {top};")
            self._sum(sm, x, f"({x} == -SC_INF) ? ({acc})0 : sc_exp({x} - {m}_top)")
        else:
            raise ValueError(s.kind)
