"""CUDA device code (NVRTC, ``extern "C" __global__``) for a KernelSpec.

Pointwise: operands that walk the output contiguously are read and written as float4 when all
of them are fp32 and 16-byte aligned (checked in the kernel, scalar tail); broadcast operands
are read once per float4 (constant along the last dim) or as a float4 (contiguous along it),
others with index math from baked shape constants. Each thread issues its ``ipt`` float4 loads
before it uses the first; a block's loads cover one contiguous chunk, and the default grid
covers the tensor once (measured on the H200: benchmarks/breakdown.py).

Rowwise: one block per row (long rows), one warp per row (short rows) or one thread per row
(rows interleaved in memory, so neighbouring threads read neighbouring addresses). The float4
path issues ``unroll`` loads per thread before using them, each with its own accumulator;
Welford and online softmax take a float4 at a time (one division, one rescale per four
elements). Reductions combine with warp shuffles and a shared-memory block step. A row read
by several passes is kept on chip: in registers when a thread's share is at most
MAX_ROW_REGS float4, else in shared memory (``cache``), else re-read (from L2 for rows that fit).

No fast-math intrinsics: expf/tanhf/erff are the accurate versions, so results stay within the
fp32 1e-4 tolerance. The kernels are memory-bound once loads overlap; the one arithmetic cost
that showed (IEEE division per element) is avoided by the update forms above and by dividing by
constants as a multiply (pointwise.py).
"""

from __future__ import annotations

import re

from .emit_c import offset
from .ir import KernelSpec, Operand, Stmt, deps_closure
from .helpers import ceildiv, contiguous_strides, round_up

CU_TYPES = {"float32": "float", "float64": "double", "float16": "__half",
            "bfloat16": "__nv_bfloat16", "bool": "bool", "int64": "long long", "int32": "int",
            "int16": "short", "int8": "signed char", "uint8": "unsigned char"}

PRELUDE = r"""#ifndef SC_PRELUDE
#define SC_PRELUDE
#define SC_INF __int_as_float(0x7f800000)
#define SC_NAN __int_as_float(0x7fffffff)
#define SC_FULL 0xffffffffu
__device__ __forceinline__ float sc_exp(float x) { return expf(x); }
__device__ __forceinline__ double sc_exp(double x) { return exp(x); }
__device__ __forceinline__ float sc_log(float x) { return logf(x); }
__device__ __forceinline__ double sc_log(double x) { return log(x); }
__device__ __forceinline__ float sc_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double sc_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float sc_erf(float x) { return erff(x); }
__device__ __forceinline__ double sc_erf(double x) { return erf(x); }
__device__ __forceinline__ float sc_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double sc_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float sc_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ double sc_expm1(double x) { return expm1(x); }
__device__ __forceinline__ float sc_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double sc_rsqrt(double x) { return rsqrt(x); }
__device__ __forceinline__ float sc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double sc_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float sc_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ double sc_softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }
__device__ __forceinline__ float sc_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double sc_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float sc_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double sc_min(double a, double b) { return fmin(a, b); }
#endif
"""

REDUCE_PRELUDE = r"""#ifndef SC_REDUCE_PRELUDE
#define SC_REDUCE_PRELUDE
template <class T> struct sc_wf { T mean, m2, n; };
template <class T> struct sc_sm { T m, s; };
template <class T> struct sc_arg { T v; long long i; };
__device__ __forceinline__ float sc_shfl(float v, int o) { return __shfl_xor_sync(SC_FULL, v, o); }
__device__ __forceinline__ double sc_shfl(double v, int o) { return __shfl_xor_sync(SC_FULL, v, o); }
__device__ __forceinline__ long long sc_shfl(long long v, int o) { return __shfl_xor_sync(SC_FULL, v, o); }
template <class T> __device__ __forceinline__ sc_wf<T> sc_shfl(sc_wf<T> a, int o) {
    return {sc_shfl(a.mean, o), sc_shfl(a.m2, o), sc_shfl(a.n, o)};
}
template <class T> __device__ __forceinline__ sc_sm<T> sc_shfl(sc_sm<T> a, int o) {
    return {sc_shfl(a.m, o), sc_shfl(a.s, o)};
}
template <class T> __device__ __forceinline__ sc_arg<T> sc_shfl(sc_arg<T> a, int o) {
    return {sc_shfl(a.v, o), sc_shfl(a.i, o)};
}
struct sc_add { template <class T> __device__ T operator()(T a, T b) const { return a + b; } };
struct sc_mul { template <class T> __device__ T operator()(T a, T b) const { return a * b; } };
struct sc_maxop { template <class T> __device__ T operator()(T a, T b) const {
    return (b > a || b != b) ? b : a; } };
struct sc_minop { template <class T> __device__ T operator()(T a, T b) const {
    return (b < a || b != b) ? b : a; } };
struct sc_wf_comb { template <class T> __device__ sc_wf<T> operator()(sc_wf<T> a, sc_wf<T> b) const {
    const T n = a.n + b.n;
    if (n == T(0)) return a;
    const T d = b.mean - a.mean, f = b.n / n;
    return {a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f, n};
} };
struct sc_sm_comb { template <class T> __device__ sc_sm<T> operator()(sc_sm<T> a, sc_sm<T> b) const {
    const T m = a.m > b.m ? a.m : b.m;
    const T s = (a.m == -SC_INF ? T(0) : a.s * sc_exp(a.m - m)) + (b.m == -SC_INF ? T(0) : b.s * sc_exp(b.m - m));
    return {m, s};
} };
struct sc_argmax_comb { template <class T> __device__ sc_arg<T> operator()(sc_arg<T> a, sc_arg<T> b) const {
    if (b.i < 0) return a;
    if (a.i < 0 || b.v > a.v || (b.v == a.v && b.i < a.i) || (b.v != b.v && a.v == a.v)
        || (b.v != b.v && a.v != a.v && b.i < a.i)) return b;   // first NaN wins, as in torch
    return a;
} };
struct sc_argmin_comb { template <class T> __device__ sc_arg<T> operator()(sc_arg<T> a, sc_arg<T> b) const {
    if (b.i < 0) return a;
    if (a.i < 0 || b.v < a.v || (b.v == a.v && b.i < a.i) || (b.v != b.v && a.v == a.v)
        || (b.v != b.v && a.v != a.v && b.i < a.i)) return b;   // first NaN wins, as in torch
    return a;
} };
template <class V, class F> __device__ __forceinline__ V sc_warp_reduce(V v, F f) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = f(v, sc_shfl(v, o));
    return v;
}
template <class V, class F> __device__ __forceinline__ V sc_block_reduce(V v, F f, V ident, V* sm) {
    v = sc_warp_reduce(v, f);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sm[w] = v;
    __syncthreads();
    if (w == 0) {
        V x = lane < nw ? sm[lane] : ident;
        x = sc_warp_reduce(x, f);
        if (lane == 0) sm[0] = x;
    }
    __syncthreads();
    return sm[0];
}
#endif
"""


def _ptr(o: Operand) -> str:
    t = CU_TYPES[o.dtype]
    if o.role == "in":
        return f"const {t}* __restrict__ {o.name}"
    return f"{t}* __restrict__ {o.name}"


def _load(o: Operand, idx: str, acc: str) -> str:
    if o.dtype == "float16":
        return f"({acc})__half2float({o.name}[{idx}])"
    if o.dtype == "bfloat16":
        return f"({acc})__bfloat162float({o.name}[{idx}])"
    if o.role == "in" and o.dtype in ("float32", "float64"):
        return f"({acc})__ldg({o.name} + {idx})"
    return f"({acc}){o.name}[{idx}]"


def _store(o: Operand, idx: str, val: str) -> str:
    if o.dtype == "float16":
        return f"{o.name}[{idx}] = __float2half_rn((float)({val}));"
    if o.dtype == "bfloat16":
        return f"{o.name}[{idx}] = __float2bfloat16_rn((float)({val}));"
    if o.dtype == "bool":
        return f"{o.name}[{idx}] = (({val}) != 0);"
    return f"{o.name}[{idx}] = ({CU_TYPES[o.dtype]})({val});"


def _rename(expr: str, local: set[str], suffix: str) -> str:
    if not suffix:
        return expr
    return re.sub(r"\bv\d+\b", lambda m: m.group(0) + suffix if m.group(0) in local else m.group(0),
                  expr)


def _elem_lines(spec: KernelSpec, stmts: list[Stmt], idx_of, suffix: str, vec: dict,
                ind: str) -> list[str]:
    """Loads and expressions for one element; ``vec[operand] = component`` for float4 lanes."""
    local = {s.var for s in stmts}
    out = []
    for s in stmts:
        name = s.var + suffix
        if s.op == "load":
            o = spec.operands[s.operand]
            src = vec.get(s.operand) or _load(o, idx_of(o), spec.acc)
            out.append(f"{ind}const {spec.acc} {name} = {src};")
        else:
            out.append(f"{ind}const {s.ctype or spec.acc} {name} = {_rename(s.expr, local, suffix)};")
    return out


def _header(spec: KernelSpec) -> str:
    inc = ""
    dts = {o.dtype for o in spec.operands}
    if "float16" in dts:
        inc += "#include <cuda_fp16.h>\n"
    if "bfloat16" in dts:
        inc += "#include <cuda_bf16.h>\n"
    pre = PRELUDE + (REDUCE_PRELUDE if spec.kind == "rowwise" else "")
    return inc + pre


def default_params(spec: KernelSpec) -> dict:
    """Launch shape the first candidate uses (refinement varies it)."""
    if spec.kind == "pointwise":
        # measured on the H200 (benchmarks/breakdown.py): 128 threads with two float4 loads
        # each and a grid that covers the tensor once (no grid-stride loop) beat 256 x 1 in a
        # persistent grid by 5-10% on 256 MB chains, matching Inductor's kernels
        return {"block": 128, "vec": 4 if vec_ok(spec) else 1, "ipt": 2, "waves": WAVES}
    strategy = row_strategy(spec)
    # 256 threads up to 4096-element rows (measured on the H200: LayerNorm rows of 4096 ran
    # 23% faster than with 512), 512 for longer rows
    block = {"block": 512 if spec.rowlen > 4096 else 256, "warp": 256, "thread": 256}[strategy]
    return {"block": block, "vec": 4 if vec_ok(spec, strategy) else 1, "rows": strategy,
            "waves": WAVES, "cache": bool(_cached_operands(spec))}


WAVES = 512   # grid cap in blocks per SM: in practice one block per chunk or row


MAX_UNROLL = 4   # float4 loads each thread has in flight before it uses the first


def auto_unroll(spec: KernelSpec, strategy: str, block: int) -> int:
    """Loads in flight per thread when the params do not say: up to MAX_UNROLL, a divisor of
    the thread's float4 count along the row when there is one (no bounds test then)."""
    lanes = block if strategy == "block" else 32
    trips = max(1, ceildiv(spec.rowlen // 4, lanes))
    return next((u for u in range(MAX_UNROLL, 1, -1) if trips % u == 0), min(MAX_UNROLL, trips))


CACHE_LIMIT = 160 * 1024   # bytes of dynamic shared memory a row cache may take (227 KB max)


def _cached_operands(spec: KernelSpec) -> list[int]:
    """fp32 per-element inputs read in more than one pass of a multi-pass row kernel: kept in
    shared memory after their first read, so the row comes from DRAM once."""
    if spec.kind != "rowwise" or spec.npasses < 2 or not spec.reduce[-1]:
        return []
    uses: dict[int, set[int]] = {}
    for s in spec.stmts:
        if s.op == "reduce":
            for ld in deps_closure(spec, [s.deps[0]]):
                if ld.op == "load":
                    uses.setdefault(ld.operand, set()).add(s.passno)
        elif s.op == "store" and s.level == "full":
            for ld in deps_closure(spec, [s.var]):
                if ld.op == "load":
                    uses.setdefault(ld.operand, set()).add(s.passno)
    out = [i for i, ps in sorted(uses.items()) if len(ps) > 1
           and spec.operands[i].role == "in" and not spec.operands[i].row
           and spec.operands[i].dtype == "float32"]
    if len(out) * round_up(spec.rowlen, 4) * 4 > CACHE_LIMIT:
        return []
    return out


def cache_bytes(spec: KernelSpec, p: dict) -> int:
    strategy = p.get("rows") or row_strategy(spec)
    if not p.get("cache") or strategy != "block" or row_in_registers(spec, p):
        return 0
    return len(_cached_operands(spec)) * round_up(spec.rowlen, 4) * 4


MAX_ROW_REGS = 8   # float4 per thread per cached operand that may stay in registers


def row_in_registers(spec: KernelSpec, p: dict) -> bool:
    """The row cache (``cache``) kept in registers rather than shared memory: each thread's
    share of the row is whole float4s, at most MAX_ROW_REGS of them, loaded once (all in
    flight together) and reused by the later passes. No shared memory, so more blocks fit."""
    strategy = p.get("rows") or row_strategy(spec)
    if not p.get("cache") or strategy not in ("block", "warp") or int(p.get("vec", 1)) != 4 \
            or not vec_ok(spec, strategy):
        return False
    ops = _cached_operands(spec)
    vo = _vec_operands(spec)
    lanes = int(p["block"]) if strategy == "block" else 32
    nv = spec.rowlen // 4
    return bool(ops) and all(i in vo for i in ops) and nv % lanes == 0 \
        and nv // lanes <= MAX_ROW_REGS


def row_strategy(spec: KernelSpec) -> str:
    if not spec.reduce[-1] or spec.rowlen <= 16:   # short rows (pooling windows): a thread each
        return "thread"
    return "block" if spec.rowlen > 1024 else "warp"


def _vec_operands(spec: KernelSpec) -> list[int]:
    """Operands read/written as float4 (contiguous along the innermost dim)."""
    if spec.kind == "pointwise":
        cont = [i for i, o in enumerate(spec.operands) if o.strides == contiguous_strides(spec.dims)]
    else:
        cont = [i for i, o in enumerate(spec.operands)
                if not o.row and o.strides[-1] == 1
                and all(s % 4 == 0 for s in o.strides[:-1])]
    return cont


def vec_ok(spec: KernelSpec, strategy: str | None = None) -> bool:
    vo = _vec_operands(spec)
    if not vo or any(spec.operands[i].dtype != "float32" for i in vo):
        return False
    if spec.kind == "pointwise":
        return spec.numel >= 4
    if (strategy or row_strategy(spec)) == "thread":
        return False
    return spec.reduce[-1] and spec.dims[-1] % 4 == 0 and spec.rowlen >= 4 and all(
        spec.operands[i].role != "inout" for i in vo)


def _broadcast_lanes(spec: KernelSpec, vops: list[int]) -> dict[int, str]:
    """Broadcast inputs of a float4 pointwise loop that need no per-lane index math: the four
    lanes of a float4 share every coordinate but the last (the last dim is a multiple of 4),
    so an operand constant along it is read once ("one") and one contiguous along it with
    16-byte aligned rows is read as a float4 ("vec4")."""
    dims = spec.dims
    if not dims or dims[-1] % 4:
        return {}
    out = {}
    for i, o in enumerate(spec.operands):
        if i in vops or o.role != "in" or o.row:
            continue
        if o.strides[-1] == 0:
            out[i] = "one"
        elif o.strides[-1] == 1 and o.dtype == "float32" and all(
                st % 4 == 0 for st in o.strides[:-1]):
            out[i] = "vec4"
    return out


def emit_cuda(spec: KernelSpec, params: dict | None = None) -> str:
    """CUDA source with one ``extern "C" __global__`` kernel named ``spec.name``."""
    params = {**default_params(spec), **(params or {})}
    if spec.kind == "rowwise" and not params.get("unroll"):   # shown in the kernel's header
        params["unroll"] = auto_unroll(spec, params.get("rows") or row_strategy(spec),
                                       int(params["block"]))
    sig = ", ".join(_ptr(o) for o in spec.operands)
    head = (f"// {spec.name}: {', '.join(spec.ops)}\n"
            f"// dims {spec.dims} (reduced: {[i for i, r in enumerate(spec.reduce) if r]}), "
            f"{spec.acc} math, params {params}\n")
    if spec.kind == "pointwise":
        body = _pointwise(spec, params)
    else:
        body = _rowwise(spec, params)
    return (_header(spec) + "\n" + head + f'extern "C" __global__ void __launch_bounds__('
            f'{int(params["block"])}) {spec.name}({sig})\n{{\n' + body + "}\n")


def launch_config(spec: KernelSpec, params: dict | None = None) -> dict:
    """grid blocks (before the SM cap) and block threads for the program to launch with."""
    p = {**default_params(spec), **(params or {})}
    b = int(p["block"])
    if spec.kind == "pointwise":
        per = b * int(p["vec"]) * int(p["ipt"])
        return {"blocks": max(1, ceildiv(spec.numel, per)), "block": b, "waves": int(p["waves"])}
    rows = spec.rows
    smem = cache_bytes(spec, p)
    if p["rows"] == "block":
        blocks = rows
    elif p["rows"] == "warp":
        blocks = ceildiv(rows, b // 32)
    else:
        blocks = ceildiv(rows, b)
    out = {"blocks": max(1, blocks), "block": b, "waves": int(p["waves"])}
    if smem:
        out["smem"] = smem
    return out


def _pointwise(spec: KernelSpec, p: dict) -> str:
    dims = spec.dims
    n = spec.numel
    ops = spec.operands
    alld = list(range(len(dims)))
    vec = int(p["vec"]) == 4 and vec_ok(spec)
    ipt = max(1, int(p.get("ipt", 1)))
    vops = _vec_operands(spec) if vec else []
    elems = [s for s in spec.stmts if s.op in ("load", "expr")]
    stores = [s for s in spec.stmts if s.op == "store"]
    ind = "    "
    L = [f"{ind}const long long n = {n}LL;",
         f"{ind}const long long step = (long long)gridDim.x * blockDim.x;",
         f"{ind}const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
         f"{ind}long long start = 0;"]

    small = n < 2 ** 31   # 32-bit index math for broadcast operands (cheaper divisions)

    def idx_at(i: str):
        def f(o):
            if o.strides == contiguous_strides(dims):
                return i
            if small:
                return offset(o.strides, dims, f"(unsigned)({i})", alld, "U")
            return offset(o.strides, dims, i, alld)
        return f

    if vec:
        bc = _broadcast_lanes(spec, vops)
        ptrs = " | ".join(f"(unsigned long long){ops[i].name}" for i in vops
                          + [i for i, how in bc.items() if how == "vec4"])
        L.append(f"{ind}if ((({ptrs}) & 15ULL) == 0) {{")
        L.append(f"{ind}    const long long nv = n / 4;")
        # each thread issues its ``ipt`` float4 loads before it uses the first
        vin = [i for i in vops if ops[i].role == "in"] + [i for i, how in bc.items()
                                                         if how == "vec4"]
        # a block's ``ipt`` loads cover one contiguous chunk of blockDim * ipt float4
        L.append(f"{ind}    for (long long q0 = (long long)blockIdx.x * blockDim.x * {ipt} + "
                 f"threadIdx.x; q0 < nv; q0 += step * {ipt}) {{")
        for i in vin:
            L.append(f"{ind}        float4 a_{ops[i].name}[{ipt}];")
        L.append(f"{ind}#pragma unroll")
        L.append(f"{ind}        for (int u = 0; u < {ipt}; ++u) {{")
        L.append(f"{ind}            const long long q = q0 + (long long)u * blockDim.x;")
        L.append(f"{ind}            if (q < nv) {{")
        for i in vin:
            at = "q" if i in vops else f"({idx_at('(4 * q)')(ops[i])}) / 4"
            L.append(f"{ind}                a_{ops[i].name}[u] = __ldg(reinterpret_cast<const "
                     f"float4*>({ops[i].name}) + {at});")
        L += [f"{ind}            }}", f"{ind}        }}"]
        L.append(f"{ind}#pragma unroll")
        L.append(f"{ind}        for (int u = 0; u < {ipt}; ++u) {{")
        L.append(f"{ind}            const long long q = q0 + (long long)u * blockDim.x;")
        L.append(f"{ind}            if (q >= nv) break;")
        i2 = ind + " " * 12
        comps = "xyzw"
        for i, how in bc.items():   # one value for all four lanes
            if how == "one":
                L.append(f"{i2}const {spec.acc} b_{ops[i].name} = "
                         f"{_load(ops[i], idx_at('(4 * q)')(ops[i]), spec.acc)};")
        for lane in range(4):
            L.append(f"{i2}const long long i_{lane} = 4 * q + {lane};")
            vmap = {i: f"a_{ops[i].name}[u].{comps[lane]}" for i in vin}
            vmap.update({i: f"b_{ops[i].name}" for i, how in bc.items() if how == "one"})
            L += _elem_lines(spec, elems, idx_at(f"i_{lane}"), f"_{lane}", vmap, i2)
        for s in stores:
            o = ops[s.operand]
            if s.operand in vops:
                L.append(f"{i2}reinterpret_cast<float4*>({o.name})[q] = make_float4("
                         + ", ".join(f"(float){s.var}_{lane}" for lane in range(4)) + ");")
            else:
                for lane in range(4):
                    L.append(i2 + _store(o, idx_at(f"i_{lane}")(o), f"{s.var}_{lane}"))
        L += [f"{ind}        }}", f"{ind}    }}", f"{ind}    start = nv * 4;", f"{ind}}}"]
    L.append(f"{ind}for (long long i = start + t; i < n; i += step) {{")
    L += _elem_lines(spec, elems, idx_at("i"), "", {}, ind + "    ")
    for s in stores:
        o = ops[s.operand]
        L.append(ind + "    " + _store(o, idx_at("i")(o), s.var))
    L.append(f"{ind}}}")
    return "\n".join(L) + "\n"


_IDENT = {"sum": "{z}", "prod": "{o}", "max": "-SC_INF", "min": "SC_INF"}
_OPS = {"sum": "sc_add()", "prod": "sc_mul()", "max": "sc_maxop()", "min": "sc_minop()"}


def _rowwise(spec: KernelSpec, p: dict) -> str:
    dims, red = spec.dims, spec.reduce
    rdims = [d for d in range(len(dims)) if not red[d]]
    edims = [d for d in range(len(dims)) if red[d]]
    ops = spec.operands
    acc = spec.acc
    strategy = p["rows"] if p.get("rows") in ("block", "warp", "thread") else row_strategy(spec)
    if strategy != "thread" and not red[-1]:
        strategy = "thread"
    vec = int(p["vec"]) == 4 and vec_ok(spec, strategy)
    vops = [i for i in _vec_operands(spec)] if vec else []
    B = int(p["block"])
    Lr = spec.rowlen
    lanes = B if strategy == "block" else 32         # threads sharing one row
    U = max(1, min(8, int(p.get("unroll") or auto_unroll(spec, strategy, B))))
    _z, _o1 = f"({acc})0", f"({acc})1"
    ind = "    "
    L: list[str] = []
    reds = [s for s in spec.stmts if s.op == "reduce"]
    regs = set(_cached_operands(spec)) if vec and row_in_registers(
        spec, {**p, "rows": strategy}) else set()
    if regs:
        U = spec.rowlen // 4 // lanes      # the thread's whole share of the row at once
    cache = {i: k * round_up(Lr, 4) for k, i in enumerate(_cached_operands(spec))} \
        if p.get("cache") and strategy == "block" and not regs else {}
    if vec and any(i not in vops for i in cache):
        cache = {}   # every cached operand must take the same float4/scalar path each pass
    if cache:
        L.append(f"{ind}extern __shared__ float4 sc_cache4[];   // the row, read from DRAM once")
        L.append(f"{ind}float* sc_cache = reinterpret_cast<float*>(sc_cache4);")
    written: set[int] = set()
    if strategy == "block":
        for s in reds:
            L.append(f"{ind}__shared__ {_red_type(s, acc)} sm_{_rid(s)}[32];")
    if strategy == "block":
        L.append(f"{ind}for (long long r = blockIdx.x; r < {spec.rows}LL; r += gridDim.x) {{")
        j0, jstep = "threadIdx.x", str(B)
        leader = "threadIdx.x == 0"
    elif strategy == "warp":
        L.append(f"{ind}const int lane = threadIdx.x & 31;")
        L.append(f"{ind}for (long long r = (long long)blockIdx.x * {B // 32} + (threadIdx.x >> 5); "
                 f"r < {spec.rows}LL; r += (long long)gridDim.x * {B // 32}) {{")
        j0, jstep = "lane", "32"
        leader = "lane == 0"
    else:
        L.append(f"{ind}for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                 f"r < {spec.rows}LL; r += (long long)gridDim.x * blockDim.x) {{")
        j0, jstep = "0", "1"
        leader = "true"
    ind2 = ind * 2
    for o in ops:
        L.append(f"{ind2}const long long b_{o.name} = {offset(o.strides, dims, 'r', rdims)};")
    if vec:
        ptrs = " | ".join(f"(unsigned long long){ops[i].name}" for i in vops)
        L.append(f"{ind2}const bool vec4 = (({ptrs}) & 15ULL) == 0;")
    for i in sorted(regs):
        L.append(f"{ind2}float4 a_{ops[i].name}[{U}];   // this thread's share of the row")
    in_regs: set[int] = set()   # register-cached operands already loaded

    def idx_row(o):
        return f"b_{o.name}"

    def idx_elem(jname):
        def f(o):
            off = offset(o.strides, dims, jname, edims)
            return f"b_{o.name}" + ("" if off == "0" else f" + {off}")
        return f

    avail: set[str] = set()
    done: set[str] = set()
    stored: set[int] = set()
    row_stmts = [s for s in spec.stmts if s.level == "row" and s.op in ("load", "expr")]

    def flush(at: str):
        progress = True
        while progress:
            progress = False
            for s in row_stmts:
                if s.var not in done and all(d in avail for d in s.deps):
                    L.extend(_elem_lines(spec, [s], idx_row, "", {}, at))
                    done.add(s.var)
                    avail.add(s.var)
                    progress = True
        for s in spec.stmts:
            if s.op == "store" and s.level == "row" and s.var in avail and id(s) not in stored:
                L.append(f"{at}if ({leader}) {_store(ops[s.operand], idx_row(ops[s.operand]), s.var)}")
                stored.add(id(s))

    flush(ind2)

    def loop(roots: list[str], tail, vstores: list | None = None,
             priv: list[Stmt] | None = None) -> None:
        """Element loop computing ``roots``; ``tail(suffixes, jexprs, need, ax=)`` gives the
        update lines for one element (scalar path) or the four lanes of a float4 (``ax``: the
        accumulator copy); ``vstores`` [(operand, var)] are written as one float4. The float4
        path issues ``unroll`` loads per thread before using the first (memory-level
        parallelism) and gives each of them its own copy of the ``priv`` reductions'
        accumulators (no serial dependency between the loads' updates); the copies are
        combined before the scalar tail."""
        vstores = vstores or []
        priv = priv or []
        need = [s for s in deps_closure(spec, roots) if s.var not in avail]
        i3 = ind2 + "    "
        loaded = {s.operand: s.var for s in need if s.op == "load" and s.operand in cache}
        first = {i for i in loaded if i not in written}
        written.update(loaded)
        L.append(f"{ind2}{{")
        if vec:
            nv = Lr // 4
            L.append(f"{ind2}long long jv = 0;")
            L.append(f"{ind2}if (vec4) {{")
            for s in priv:
                a = f"a{_rid(s)}"
                L.append(f"{i3}{_red_type(s, acc)} {a}_p[{U}];")
                L.append(f"{i3}#pragma unroll")
                L.append(f"{i3}for (int u = 0; u < {U}; ++u) {a}_p[u] = {_ident(s, acc)};")
            if regs:   # one group of U loads covers the thread's share of the row
                L.append(f"{i3}{{ const long long q0 = {j0};")
            else:
                L.append(f"{i3}for (long long q0 = {j0}; q0 < {nv}LL; q0 += {U * lanes}LL) {{")
            i4, i5 = i3 + "    ", i3 + "        "
            used = {s.operand for s in need if s.op == "load"}
            vin = [i for i in vops if i in used and ops[i].role == "in"]
            for i in vin:
                if i not in regs:
                    L.append(f"{i4}float4 a_{ops[i].name}[{U}];")
            reuse = {i for i in vin if i in in_regs}
            in_regs.update(i for i in vin if i in regs)
            vin_load = [i for i in vin if i not in reuse]
            # no bounds test when every thread makes whole groups of U loads
            guard = [f"{i5}if (q >= {nv}LL) break;"] if nv % (U * lanes) else []
            L.append(f"{i4}#pragma unroll")
            L.append(f"{i4}for (int u = 0; u < {U}; ++u) {{")
            L.append(f"{i5}const long long q = q0 + (long long)u * {lanes};")
            L.extend(guard)
            for i in vin_load:
                src = (f"*reinterpret_cast<const float4*>(sc_cache + {cache[i]} + 4 * q)"
                       if i in loaded and i not in first else
                       f"__ldg(reinterpret_cast<const float4*>({ops[i].name} + "
                       f"{idx_elem('(4 * q)')(ops[i])}))")
                L.append(f"{i5}a_{ops[i].name}[u] = {src};")
            L.append(f"{i4}}}")
            L.append(f"{i4}#pragma unroll")
            L.append(f"{i4}for (int u = 0; u < {U}; ++u) {{")
            L.append(f"{i5}const long long q = q0 + (long long)u * {lanes};")
            L.extend(guard)
            for i in vin:
                if i in first:   # after all U loads are issued: the row cache is filled here
                    L.append(f"{i5}*reinterpret_cast<float4*>(sc_cache + {cache[i]} + 4 * q)"
                             f" = a_{ops[i].name}[u];")
            for lane in range(4):
                L.append(f"{i5}const long long j_{lane} = 4 * q + {lane};")
                vmap = {i: f"a_{ops[i].name}[u].{'xyzw'[lane]}" for i in vin}
                L.extend(_elem_lines(spec, need, idx_elem(f"j_{lane}"), f"_{lane}", vmap, i5))
            L.extend(i5 + t for t in tail([f"_{k}" for k in range(4)],
                                          [f"j_{k}" for k in range(4)], need, ax="u"))
            for oi, v in vstores:
                L.append(f"{i5}*reinterpret_cast<float4*>({ops[oi].name} + "
                         f"{idx_elem('(4 * q)')(ops[oi])}) = make_float4("
                         + ", ".join(f"(float){sfx(v, f'_{lane}', need)}" for lane in range(4))
                         + ");")
            L.append(f"{i4}}}")
            L.append(f"{i3}}}")
            for s in priv:
                a = f"a{_rid(s)}"
                L.append(f"{i3}#pragma unroll")
                L.append(f"{i3}for (int u = 0; u < {U}; ++u) {a} = {_comb(s)}({a}, {a}_p[u]);")
            L.append(f"{i3}jv = {nv * 4}LL;")
            L.append(f"{ind2}}}")
            start = f"jv + {j0}"
        else:
            start = j0
        L.append(f"{ind2}for (long long j = {start}; j < {Lr}LL; j += {jstep}) {{")
        smap = {i: f"({acc})sc_cache[{cache[i]} + j]" for i in loaded if i not in first}
        L.extend(_elem_lines(spec, need, idx_elem("j"), "", smap, i3))
        L.extend(f"{i3}sc_cache[{cache[i]} + j] = (float){loaded[i]};" for i in sorted(first))
        L.extend(i3 + t for t in tail([""], ["j"], need, scalar=True))
        L.append(f"{ind2}}}")
        L.append(f"{ind2}}}")

    def sfx(var, suffix, need):
        return var + suffix if any(s.var == var for s in need) else var

    for pno in range(1, spec.npasses + 1):
        pass_reds = [s for s in reds if s.passno == pno]
        for s in pass_reds:
            L.append(f"{ind2}{_red_type(s, acc)} a{_rid(s)} = {_ident(s, acc)};")
        if pass_reds:
            def tail(sfxs, js, need, pass_reds=pass_reds, scalar=False, ax=None):
                out = []
                for s in pass_reds:
                    xs = [sfx(s.deps[0], k, need) for k in sfxs]
                    a = f"a{_rid(s)}" + ("" if ax is None else f"_p[{ax}]")
                    if len(xs) == 4 and s.kind in ("welford", "softmax"):
                        out.append(_group_update(s.kind, a, xs, acc))
                        continue
                    for x, j in zip(xs, js):
                        out.append(_update(s.kind, a, x, j, acc))
                return out
            loop([s.deps[0] for s in pass_reds], tail, priv=pass_reds)
            for s in pass_reds:
                a = f"a{_rid(s)}"
                comb = _comb(s)
                if strategy == "block":
                    L.append(f"{ind2}{a} = sc_block_reduce({a}, {comb}, "
                             f"{_ident(s, acc, braced=True)}, sm_{_rid(s)});")
                elif strategy == "warp":
                    L.append(f"{ind2}{a} = sc_warp_reduce({a}, {comb});")
                for role, v in s.outs.items():
                    field = {"sum": "", "r": "", "val": ".v", "idx": ".i", "mean": ".mean",
                             "m2": ".m2", "m": ".m", "s": ".s"}[role]
                    ct = "long long" if role == "idx" else acc
                    L.append(f"{ind2}const {ct} {v} = {a}{field};")
                    avail.add(v)
        flush(ind2)
        full_stores = [s for s in spec.stmts if s.op == "store" and s.level == "full"
                       and s.passno == pno]
        if full_stores:
            vst = [(s.operand, s.var) for s in full_stores if vec and s.operand in vops
                   and ops[s.operand].dtype == "float32"]
            vset = {oi for oi, _ in vst}

            def stail(sfxs, js, need, full_stores=full_stores, scalar=False, vset=vset,
                      ax=None):
                return [_store(ops[s.operand], idx_elem(j)(ops[s.operand]), sfx(s.var, k, need))
                        for k, j in zip(sfxs, js)
                        for s in full_stores if scalar or s.operand not in vset]
            loop([s.var for s in full_stores], stail, vst)
    L.append(f"{ind}}}")
    return "\n".join(L) + "\n"


def _update(kind: str, a: str, x: str, j: str, acc: str) -> str:
    """Accumulator ``a`` takes element ``x`` (at row index ``j``)."""
    if kind == "sum":
        return f"{a} += {x};"
    if kind == "prod":
        return f"{a} *= {x};"
    if kind in ("max", "min"):
        c = ">" if kind == "max" else "<"
        return f"{a} = ({x} {c} {a} || {x} != {x}) ? {x} : {a};"
    if kind in ("argmax", "argmin"):
        c = ">" if kind == "argmax" else "<"
        return (f"if ({x} {c} {a}.v || {a}.i < 0 || ({x} != {x} && {a}.v == {a}.v)) "
                f"{{ {a}.v = {x}; {a}.i = {j}; }}")
    if kind == "welford":
        return (f"{{ {a}.n += ({acc})1; const {acc} d = {x} - {a}.mean; "
                f"{a}.mean += d / {a}.n; {a}.m2 += d * ({x} - {a}.mean); }}")
    if kind == "softmax":
        return (f"if ({x} > {a}.m) {{ {a}.s = ({a}.m == -SC_INF ? ({acc})0 : "
                f"{a}.s * sc_exp({a}.m - {x})) + ({acc})1; {a}.m = {x}; }} "
                f"else if ({x} != -SC_INF) {{ {a}.s += sc_exp({x} - {a}.m); }}")
    raise ValueError(kind)


def _group_update(kind: str, a: str, xs: list[str], acc: str) -> str:
    """Accumulator ``a`` takes the four elements of one float4 at once.

    Welford merges the group's own mean and M2 (Chan et al.): one division per four elements
    instead of one per element on the accumulator's dependency chain. Softmax rescales once
    per group, to the group's max, and adds one exponential per element with no branch;
    NaN still reaches the sum (``sc_max`` skips it, ``exp(NaN - m)`` does not) and an
    all -inf prefix adds nothing, as in the element-wise update.
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
        return (f"{{ const {acc} gm = sc_max(sc_max({x0}, {x1}), sc_max({x2}, {x3})); "
                f"if (gm > {a}.m) {{ {a}.s = ({a}.m == -SC_INF ? {z}0 : {a}.s * sc_exp({a}.m - gm)); "
                f"{a}.m = gm; }} "
                f"if ({a}.m != -SC_INF) {a}.s += (sc_exp({x0} - {a}.m) + sc_exp({x1} - {a}.m)) + "
                f"(sc_exp({x2} - {a}.m) + sc_exp({x3} - {a}.m)); }}")
    raise ValueError(kind)


def _rid(s: Stmt) -> str:
    return next(iter(s.outs.values()))


def _red_type(s: Stmt, acc: str) -> str:
    return {"welford": f"sc_wf<{acc}>", "softmax": f"sc_sm<{acc}>", "argmax": f"sc_arg<{acc}>",
            "argmin": f"sc_arg<{acc}>"}.get(s.kind, acc)


def _ident(s: Stmt, acc: str, braced: bool = False) -> str:
    z, o = f"({acc})0", f"({acc})1"
    t = _red_type(s, acc)
    v = {"sum": z, "prod": o, "max": f"-({acc})SC_INF", "min": f"({acc})SC_INF",
         "welford": f"{t}{{{z}, {z}, {z}}}", "softmax": f"{t}{{-({acc})SC_INF, {z}}}",
         "argmax": f"{t}{{-({acc})SC_INF, -1LL}}", "argmin": f"{t}{{({acc})SC_INF, -1LL}}"}[s.kind]
    return v


def _comb(s: Stmt) -> str:
    return {"sum": "sc_add()", "prod": "sc_mul()", "max": "sc_maxop()", "min": "sc_minop()",
            "welford": "sc_wf_comb()", "softmax": "sc_sm_comb()", "argmax": "sc_argmax_comb()",
            "argmin": "sc_argmin_comb()"}[s.kind]

