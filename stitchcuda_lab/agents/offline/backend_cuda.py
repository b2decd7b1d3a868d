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
MAX_ROW_REGS float4, else in shared memory (``cache``), where one block's is too small in the
shared memory of a thread-block cluster's blocks, a slice each, their partial states combined
through distributed shared memory (``cluster``, Hopper), else re-read (from L2 for rows that
fit); with one thread per row, in a register array of the row's length (THREAD_ROW_REGS at
most).

No fast-math intrinsics but the divisions of sigmoid and mish (their comments say why they
hold): expf/tanhf/erff are the accurate versions, so results stay within the fp32 1e-4
tolerance. The kernels are memory-bound once loads overlap; the one arithmetic cost that
showed (IEEE division per element) is avoided by the update forms above and by dividing by
constants as a multiply (pointwise.py).
"""

from __future__ import annotations

from .codegen import (FIELDS, REDUCTIONS, RowValues, acc_name, elem_index, elem_lines,
                      group_update, identity, offset, reduction_id, row_bases, row_passes,
                      state_type, update)
from .helpers import contiguous_strides
from .ir import KernelSpec, Operand, Stmt, deps_closure
from .conv_tc import TC_PRELUDE
from .pool import dense_tile, pool_body_cuda
from .scan import scan_body_cuda, scan_stmt
from .launch import (auto_unroll, cached_operands, default_params, kernel_strategy,
                     row_cluster, row_in_registers, slice_len, thread_row_operands, vec_ok,
                     vec_operands)

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
// a quotient by 1 + e^-x >= 1 with __fdividef (2 ulps up to 2^126; past it, x < -87.3, 0
// where the true value is below 1.2e-38), as mish's below
__device__ __forceinline__ float sc_sigmoid(float x) {
    return __fdividef(1.0f, 1.0f + expf(-x));
}
__device__ __forceinline__ double sc_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float sc_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ double sc_softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }
// mish: x * tanh(log1p(e^x)) is x * n / (n + 2) with n = e^x (e^x + 2): one exp instead of
// exp, log1p and tanh; past 20, tanh(softplus(x)) rounds to 1 (fminf keeps a NaN's x NaN)
// the quotient by n + 2 in [2, 2.4e17] is the one place a fast form is used: __fdividef is
// within 2 ulps for a divisor below 2^126, where IEEE division's subroutine took a large
// share of a dense convolution's time on an H100 (KernelBench's Conv2d_Subtract_Subtract_Mish:
// 528 million outputs, 1.5 of its 3.8 ms went to mish)
__device__ __forceinline__ float sc_mish(float x) {
    const float e = expf(fminf(x, 20.0f)), n = e * (e + 2.0f);
    return x > 20.0f ? x : x * __fdividef(n, n + 2.0f);
}
__device__ __forceinline__ double sc_mish(double x) {
    const double e = exp(fmin(x, 20.0)), n = e * (e + 2.0);
    return x > 20.0 ? x : x * (n / (n + 2.0));
}
__device__ __forceinline__ float sc_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double sc_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float sc_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double sc_min(double a, double b) { return fmin(a, b); }
// torch.maximum / minimum: a NaN on either side is the result (fmaxf returns the other)
__device__ __forceinline__ float sc_maximum(float a, float b) { return a != a ? a : (a > b ? a : b); }
__device__ __forceinline__ double sc_maximum(double a, double b) { return a != a ? a : (a > b ? a : b); }
__device__ __forceinline__ float sc_minimum(float a, float b) { return a != a ? a : (a < b ? a : b); }
__device__ __forceinline__ double sc_minimum(double a, double b) { return a != a ? a : (a < b ? a : b); }
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
    // a side whose max is the max keeps its sum as it is (-inf or inf: exp would make NaN of
    // it); the other's is scaled down, a NaN in it kept
    const T s = (a.m == m ? a.s : a.s * sc_exp(a.m - m)) + (b.m == m ? b.s : b.s * sc_exp(b.m - m));
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
// the largest of some types' sizes: one shared array for all of a kernel's split reductions
template <class T> __host__ __device__ constexpr unsigned sc_size_max() { return sizeof(T); }
template <class T, class U, class... R> __host__ __device__ constexpr unsigned sc_size_max() {
    return sizeof(T) > sc_size_max<U, R...>() ? sizeof(T) : sc_size_max<U, R...>();
}
// a row split among the warps of a block, lane l of each on row l (``split``): the warps'
// partial states combined in warp order, the result seen by all of them
template <class V, class F> __device__ __forceinline__ V sc_split_reduce(V v, F f, V (*sm)[32]) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    sm[w][lane] = v;
    __syncthreads();
    if (w == 0) {
        for (int k = 1; k < nw; ++k) v = f(v, sm[k][lane]);
        sm[0][lane] = v;
    }
    __syncthreads();
    v = sm[0][lane];
    __syncthreads();   // the array is written again by the next reduction
    return v;
}
// a row shared by the blocks of a thread-block cluster (Hopper, ``cluster``): each block's
// state (the same in all its threads) put in its own shared slot, and every block combines
// the slots of all of them in rank order, read through distributed shared memory, so each
// gets the same bits. The second barrier keeps a slot alive until every block has read it.
// Hopper and Blackwell's data-centre parts only (sm_90, sm_100): a slice's cache needs their
// 227 KB of shared memory a block (sm_120 has 99 KB, and takes the plain kernel)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1100
#define SC_CLUSTERS 1   // what a kernel's clustered body is compiled under (_row_body)
#define SC_CLUSTER(n) __cluster_dims__(n, 1, 1)
__device__ __forceinline__ unsigned sc_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void sc_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
template <class V, class F> __device__ __forceinline__ V sc_cluster_reduce(V v, F f, V* slot,
                                                                           unsigned cs) {
    if (threadIdx.x == 0) *slot = v;
    sc_cluster_sync();
    V x = v;
    for (unsigned k = 0; k < cs; ++k) {
        unsigned long long at;
        asm volatile("mapa.u64 %0, %1, %2;" : "=l"(at) : "l"(slot), "r"(k));
        const V y = *reinterpret_cast<const V*>(at);
        x = k ? f(x, y) : y;
    }
    sc_cluster_sync();
    return x;
}
#else
#define SC_CLUSTER(n)
#endif
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


def _header(spec: KernelSpec, tc: bool = False) -> str:
    inc = ""
    dts = {o.dtype for o in spec.operands}
    if "float16" in dts:
        inc += "#include <cuda_fp16.h>\n"
    if "bfloat16" in dts:
        inc += "#include <cuda_bf16.h>\n"
    pre = PRELUDE + (REDUCE_PRELUDE if spec.kind == "rowwise" else "") + (TC_PRELUDE if tc else "")
    return inc + pre


def emit_cuda(spec: KernelSpec, params: dict | None = None) -> str:
    """CUDA source with one ``extern "C" __global__`` kernel named ``spec.name``."""
    params = {**default_params(spec), **(params or {})}
    tc, bounds, cluster = False, "", ""
    if spec.kind == "rowwise" and not params.get("unroll"):   # shown in the kernel's header
        params["unroll"] = auto_unroll(spec, kernel_strategy(spec, params),
                                       int(params["block"]))
    sig = ", ".join(_ptr(o) for o in spec.operands)
    head = (f"// {spec.name}: {', '.join(spec.ops)}\n"
            f"// dims {spec.dims} (reduced: {[i for i, r in enumerate(spec.reduce) if r]}), "
            f"{spec.acc} math, params {params}\n")
    if spec.kind == "pointwise":
        body = _pointwise(spec, params)
    elif spec.kind == "pool":
        body = pool_body_cuda(spec, _load, _store, params)
        tile = dense_tile(spec, params)
        if tile is not None and tile.get("tc"):   # conv_tc.py: four warps, its helpers
            params["block"], tc = tile["threads"], True
            bounds = f"{tile['threads']}, {tile['min_blocks']}"
    elif scan_stmt(spec) is not None:
        body = scan_body_cuda(spec, _load, _store, int(params["block"]),
                              int(params.get("ipt") or 1))
    else:
        body, cluster = _row_body(spec, params)
    return (_header(spec, tc) + "\n" + head + f'extern "C" __global__ void __launch_bounds__('
            f'{bounds or int(params["block"])}){cluster} {spec.name}({sig})\n{{\n' + body + "}\n")


def _row_body(spec: KernelSpec, params: dict) -> tuple[str, str]:
    """A row kernel's body, and its cluster attribute where blocks share a row (``cluster``):
    on a GPU without clusters (before Hopper) the same launch runs the plain body, the first
    block of each group taking the whole row and the rest returning."""
    cs = row_cluster(spec, params)
    if not cs:
        return _RowKernel(spec, params).body(), ""
    shared = _RowKernel(spec, params, cs).body()
    alone = _RowKernel(spec, {**params, "cluster": 0, "cache": False}, cs, alone=True).body()
    return f"#ifdef SC_CLUSTERS\n{shared}#else\n{alone}#endif\n", f" SC_CLUSTER({cs})"


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


def _pointwise_index(spec: KernelSpec, i: str):
    """Index of flat element ``i`` per operand (32-bit math for broadcasts of small tensors:
    cheaper divisions)."""
    dims, alld = spec.dims, list(range(len(spec.dims)))
    small = spec.numel < 2 ** 31

    def at(o: Operand) -> str:
        if o.strides == contiguous_strides(dims):
            return i
        if small:
            return offset(o.strides, dims, f"(unsigned)({i})", alld, "U")
        return offset(o.strides, dims, i, alld)
    return at


def _pointwise(spec: KernelSpec, p: dict) -> str:
    vec = int(p["vec"]) == 4 and vec_ok(spec)
    ind = "    "
    L = [f"{ind}const long long n = {spec.numel}LL;",
         f"{ind}const long long step = (long long)gridDim.x * blockDim.x;",
         f"{ind}const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
         f"{ind}long long start = 0;"]
    elems = [s for s in spec.stmts if s.op in ("load", "expr")]
    stores = [s for s in spec.stmts if s.op == "store"]
    if vec:
        L += _pointwise_float4(spec, p, elems, stores)
    at_i = _pointwise_index(spec, "i")
    L.append(f"{ind}for (long long i = start + t; i < n; i += step) {{")
    L += elem_lines(spec, elems, _load, at_i, ind=ind + "    ")
    for s in stores:
        o = spec.operands[s.operand]
        L.append(ind + "    " + _store(o, at_i(o), s.var))
    L.append(f"{ind}}}")
    return "\n".join(L) + "\n"


def _pointwise_float4(spec: KernelSpec, p: dict, elems: list[Stmt],
                      stores: list[Stmt]) -> list[str]:
    """The float4 loop of a pointwise kernel (aligned operands; the scalar loop does the tail)."""
    ops = spec.operands
    ipt = max(1, int(p.get("ipt", 1)))
    vops = vec_operands(spec)
    ind = "    "
    L: list[str] = []
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
    at_q = _pointwise_index(spec, "(4 * q)")
    for i in vin:
        at = "q" if i in vops else f"({at_q(ops[i])}) / 4"
        L.append(f"{ind}                a_{ops[i].name}[u] = __ldg(reinterpret_cast<const "
                 f"float4*>({ops[i].name}) + {at});")
    L += [f"{ind}            }}", f"{ind}        }}"]
    L.append(f"{ind}#pragma unroll")
    L.append(f"{ind}        for (int u = 0; u < {ipt}; ++u) {{")
    L.append(f"{ind}            const long long q = q0 + (long long)u * blockDim.x;")
    L.append(f"{ind}            if (q >= nv) break;")
    i2 = ind + " " * 12
    for i, how in bc.items():   # one value for all four lanes
        if how == "one":
            L.append(f"{i2}const {spec.acc} b_{ops[i].name} = "
                     f"{_load(ops[i], at_q(ops[i]), spec.acc)};")
    for lane in range(4):
        L.append(f"{i2}const long long i_{lane} = 4 * q + {lane};")
        vmap = {i: f"a_{ops[i].name}[u].{'xyzw'[lane]}" for i in vin}
        vmap.update({i: f"b_{ops[i].name}" for i, how in bc.items() if how == "one"})
        L += elem_lines(spec, elems, _load, _pointwise_index(spec, f"i_{lane}"), f"_{lane}",
                        vmap, i2)
    for s in stores:
        o = ops[s.operand]
        if s.operand in vops:
            L.append(f"{i2}reinterpret_cast<float4*>({o.name})[q] = make_float4("
                     + ", ".join(f"(float){s.var}_{lane}" for lane in range(4)) + ");")
        else:
            for lane in range(4):
                L.append(i2 + _store(o, _pointwise_index(spec, f"i_{lane}")(o),
                                     f"{s.var}_{lane}"))
    L += [f"{ind}        }}", f"{ind}    }}", f"{ind}    start = nv * 4;", f"{ind}}}"]
    return L


def _suffixed(var: str, suffix: str, need: list[Stmt]) -> str:
    """``var`` as the element loop names it: suffixed when the loop computes it."""
    return var + suffix if any(s.var == var for s in need) else var


class _RowKernel:
    """A row kernel: rows over blocks, warps or threads (``strategy``); in each row, one
    element loop per pass (float4 path plus scalar tail) feeding that pass's reductions or
    writing its outputs, with the row values printed in between."""

    ind, ind2 = "    ", "        "

    def __init__(self, spec: KernelSpec, p: dict, group: int = 0, alone: bool = False) -> None:
        """``group``: blocks a row (a cluster's, ``launch.row_cluster``), sharing it unless
        ``alone`` (no clusters: the group's first block takes the whole row)."""
        self.spec, self.ops, self.acc = spec, spec.operands, spec.acc
        self.group, self.alone = group, alone
        self.cs = 0 if alone else group   # blocks of a cluster, each on a slice of the row
        strategy = self.strategy = kernel_strategy(spec, p)
        self.vec = int(p["vec"]) == 4 and vec_ok(spec, strategy) and strategy != "split"
        self.vops = list(vec_operands(spec)) if self.vec else []
        self.B = int(p["block"])
        self.lanes = self.B if strategy == "block" else 32         # threads sharing one row
        self.U = max(1, min(8, int(p.get("unroll") or auto_unroll(spec, strategy, self.B))))
        self.reds = [s for s in spec.stmts if s.op == "reduce"]
        self.regs = set(cached_operands(spec)) if self.vec and row_in_registers(
            spec, {**p, "rows": strategy}) else set()
        if self.regs:
            self.U = spec.rowlen // 4 // self.lanes      # the thread's whole share of the row
        self.cache = {}   # cached operand -> its offset in shared memory
        if p.get("cache") and strategy == "block" and not self.regs:
            span = slice_len(spec, self.cs)
            self.cache = {i: k * span for k, i in enumerate(cached_operands(spec, self.cs))}
        if self.vec and any(i not in self.vops for i in self.cache):
            self.cache = {}   # every cached operand must take the same float4/scalar path each pass
        # one thread per row: the row in a local array indexed only by unrolled loops, so it
        # lives in registers
        self.thread_regs = bool(p.get("cache")) and strategy == "thread" \
            and bool(thread_row_operands(spec))
        if self.thread_regs:
            self.cache = {i: k * spec.rowlen for k, i in enumerate(thread_row_operands(spec))}
        self.written: set[int] = set()   # cached operands already in shared memory
        self.in_regs: set[int] = set()   # register-cached operands already loaded
        self.rows = RowValues(spec, _load, _store)
        self.L: list[str] = []

    def body(self) -> str:
        self._head()
        self.rows.flush(self.L, self.ind2, f"if ({self.leader}) ")
        for _, reds, stores in row_passes(self.spec):
            for s in reds:
                self.L.append(f"{self.ind2}{state_type(s, self.acc)} {acc_name(s)} = "
                              f"{identity(s, self.acc)};")
            if reds:
                self._reduce_pass(reds)
            self.rows.flush(self.L, self.ind2, f"if ({self.leader}) ")
            if stores:
                self._store_pass(stores)
        self.L.append(f"{self.ind}}}")
        return "\n".join(self.L) + "\n"

    def _head(self) -> None:
        """Shared memory, the row loop of the strategy, the row's bases and register arrays."""
        spec, ind, ind2, L, B = self.spec, self.ind, self.ind2, self.L, self.B
        if self.thread_regs:
            L.append(f"{ind}float sc_cache[{len(self.cache) * spec.rowlen}];   "
                     "// the thread's row, read from DRAM once, in registers")
        elif self.cache:
            L.append(f"{ind}extern __shared__ float4 sc_cache4[];   "
                     "// the row, read from DRAM once")
            L.append(f"{ind}float* sc_cache = reinterpret_cast<float*>(sc_cache4);")
        if self.strategy == "block" and self.group:
            self._group_head()
        elif self.strategy == "block":
            for s in self.reds:
                L.append(f"{ind}__shared__ {state_type(s, self.acc)} sm_{reduction_id(s)}[32];")
            L.append(f"{ind}for (long long r = blockIdx.x; r < {spec.rows}LL; r += gridDim.x) {{")
            self.j0, self.jstep, self.leader = "threadIdx.x", str(B), "threadIdx.x == 0"
        elif self.strategy == "warp":
            L.append(f"{ind}const int lane = threadIdx.x & 31;")
            L.append(f"{ind}for (long long r = (long long)blockIdx.x * {B // 32} + "
                     f"(threadIdx.x >> 5); r < {spec.rows}LL; "
                     f"r += (long long)gridDim.x * {B // 32}) {{")
            self.j0, self.jstep, self.leader = "lane", "32", "lane == 0"
        elif self.strategy == "split":
            # every thread of the block goes round the loop together (the combine syncs
            # them); a lane past the last row reads nothing and writes nothing
            # one array for every reduction, as large as the largest state: one each took
            # past the 48 KB of static shared memory (seven fp64 states at 512 threads);
            # sc_split_reduce syncs before it returns, so the next one may write it
            if self.reds:
                types = ", ".join(sorted({state_type(s, self.acc) for s in self.reds}))
                L.append(f"{ind}__shared__ __align__(16) unsigned char "
                         f"sc_split_sm[{B // 32} * 32 * sc_size_max<{types}>()];")
            L.append(f"{ind}const int lane = threadIdx.x & 31, p_w = threadIdx.x >> 5;")
            L.append(f"{ind}for (long long r0 = (long long)blockIdx.x * 32; r0 < {spec.rows}LL; "
                     "r0 += (long long)gridDim.x * 32) {")
            # a lane past the last row takes the last row's bases: its row values (read by
            # every lane) stay inside the tensors
            L.append(f"{ind2}const bool live = r0 + lane < {spec.rows}LL;")
            L.append(f"{ind2}const long long r = live ? r0 + lane : {spec.rows - 1}LL;")
            self.j0, self.jstep, self.leader = "p_w", str(B // 32), "live && p_w == 0"
        else:
            L.append(f"{ind}for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                     f"r < {spec.rows}LL; r += (long long)gridDim.x * blockDim.x) {{")
            self.j0, self.jstep, self.leader = "0", "1", "true"
        L.extend(row_bases(spec, ind2))
        if self.vec:
            ptrs = " | ".join(f"(unsigned long long){self.ops[i].name}" for i in self.vops)
            L.append(f"{ind2}const bool vec4 = (({ptrs}) & 15ULL) == 0;")
        for i in sorted(self.regs):
            L.append(f"{ind2}float4 a_{self.ops[i].name}[{self.U}];   "
                     "// this thread's share of the row")

    def _group_head(self) -> None:
        """The row loop of a block strategy with ``group`` blocks a row: each of a cluster's
        blocks on its slice ``[jlo, jhi)`` (float4s ``[qlo, qhi)``), or the group's first
        block alone on the whole row."""
        spec, ind, L, g = self.spec, self.ind, self.L, self.group
        for s in self.reds:
            st = state_type(s, self.acc)
            L.append(f"{ind}__shared__ {st} sm_{reduction_id(s)}[32];")
            if self.cs:
                L.append(f"{ind}__shared__ {st} cl_{reduction_id(s)};   // the cluster's slot")
        if self.alone:
            L.append(f"{ind}if (blockIdx.x % {g}) return;   // no clusters: one block a row")
            self.leader = "threadIdx.x == 0"
        else:
            n = slice_len(spec, g)
            L.append(f"{ind}const unsigned sc_rank = sc_cluster_rank();")
            L.append(f"{ind}const long long jlo = (long long)sc_rank * {n}, "
                     f"jhi = jlo + {n} < {spec.rowlen}LL ? jlo + {n} : {spec.rowlen}LL;")
            L.append(f"{ind}const long long qlo = jlo / 4, qhi = jhi / 4;")
            self.leader = "threadIdx.x == 0 && sc_rank == 0"
        L.append(f"{ind}for (long long r = blockIdx.x / {g}; r < {spec.rows}LL; "
                 f"r += gridDim.x / {g}) {{")
        self.j0, self.jstep = "threadIdx.x", str(self.B)

    def _reduce_pass(self, reds: list[Stmt]) -> None:
        """One element loop accumulating ``reds``, then their warp/block combine."""
        acc, ind2 = self.acc, self.ind2

        def tail(sfxs, js, need, scalar=False, ax=None):
            out = []
            for s in reds:
                xs = [_suffixed(s.deps[0], k, need) for k in sfxs]
                a = acc_name(s) + ("" if ax is None else f"_p[{ax}]")
                if len(xs) == 4 and s.kind in ("welford", "softmax"):
                    out.append(group_update(s.kind, a, xs, acc))
                    continue
                for x, j in zip(xs, js):
                    out.append(update(s.kind, a, x, j, acc))
            return out
        self._loop([s.deps[0] for s in reds], tail, priv=reds)
        for s in reds:
            a, comb = acc_name(s), REDUCTIONS[s.kind].combine
            if self.strategy == "block":
                self.L.append(f"{ind2}{a} = sc_block_reduce({a}, {comb}, "
                              f"{identity(s, acc)}, sm_{reduction_id(s)});")
                if self.cs:
                    self.L.append(f"{ind2}{a} = sc_cluster_reduce({a}, {comb}, "
                                  f"&cl_{reduction_id(s)}, {self.cs}u);")
            elif self.strategy == "warp":
                self.L.append(f"{ind2}{a} = sc_warp_reduce({a}, {comb});")
            elif self.strategy == "split":
                st = state_type(s, acc)
                self.L.append(f"{ind2}{a} = sc_split_reduce({a}, {comb}, "
                              f"reinterpret_cast<{st} (*)[32]>(sc_split_sm));")
            for role, v in s.outs.items():
                ct = "long long" if role == "idx" else acc
                self.L.append(f"{ind2}const {ct} {v} = {a}{FIELDS[role]};")
                self.rows.avail.add(v)

    def _store_pass(self, stores: list[Stmt]) -> None:
        """One element loop writing the per-element outputs ``stores`` (float4 where it can)."""
        ops = self.ops
        vst = [(s.operand, s.var) for s in stores if self.vec and s.operand in self.vops
               and ops[s.operand].dtype == "float32"]
        vset = {oi for oi, _ in vst}

        def tail(sfxs, js, need, scalar=False, ax=None):
            return [_store(ops[s.operand], elem_index(self.spec, j)(ops[s.operand]),
                           _suffixed(s.var, k, need))
                    for k, j in zip(sfxs, js)
                    for s in stores if scalar or s.operand not in vset]
        self._loop([s.var for s in stores], tail, vst)

    def _loop(self, roots: list[str], tail, vstores: list | None = None,
              priv: list[Stmt] | None = None) -> None:
        """Element loop computing ``roots``; ``tail(suffixes, jexprs, need, ax=)`` gives the
        update lines for one element (scalar path) or the four lanes of a float4 (``ax``: the
        accumulator copy); ``vstores`` [(operand, var)] are written as one float4. The float4
        path issues ``unroll`` loads per thread before using the first (memory-level
        parallelism) and gives each of them its own copy of the ``priv`` reductions'
        accumulators (no serial dependency between the loads' updates); the copies are
        combined before the scalar tail."""
        need = [s for s in deps_closure(self.spec, roots) if s.var not in self.rows.avail]
        loaded = {s.operand: s.var for s in need if s.op == "load" and s.operand in self.cache}
        first = {i for i in loaded if i not in self.written}
        self.written.update(loaded)
        self.L.append(f"{self.ind2}{{")
        if self.vec:
            self._vec_loop(need, tail, vstores or [], priv or [], loaded, first)
            start = f"(jv > jlo ? jv : jlo) + {self.j0}" if self.cs else f"jv + {self.j0}"
        else:
            start = f"jlo + {self.j0}" if self.cs else self.j0
        self._scalar_loop(need, tail, start, loaded, first)

    def _vec_loop(self, need, tail, vstores, priv, loaded, first) -> None:
        """The float4 part of an element loop (aligned rows), leaving ``jv`` where the scalar
        tail starts."""
        ops, acc, U, lanes, L = self.ops, self.acc, self.U, self.lanes, self.L
        ind2 = self.ind2
        i3 = ind2 + "    "
        i4, i5 = i3 + "    ", i3 + "        "
        nv = self.spec.rowlen // 4
        L.append(f"{ind2}long long jv = 0;")
        L.append(f"{ind2}if (vec4) {{")
        for s in priv:
            a = acc_name(s)
            L.append(f"{i3}{state_type(s, acc)} {a}_p[{U}];")
            L.append(f"{i3}#pragma unroll")
            L.append(f"{i3}for (int u = 0; u < {U}; ++u) {a}_p[u] = {identity(s, acc)};")
        if self.regs:   # one group of U loads covers the thread's share of the row
            L.append(f"{i3}{{ const long long q0 = {self.j0};")
        elif self.cs:   # the block's slice of the row
            L.append(f"{i3}for (long long q0 = qlo + {self.j0}; q0 < qhi; q0 += {U * lanes}LL) {{")
        else:
            L.append(f"{i3}for (long long q0 = {self.j0}; q0 < {nv}LL; q0 += {U * lanes}LL) {{")
        used = {s.operand for s in need if s.op == "load"}
        vin = [i for i in self.vops if i in used and ops[i].role == "in"]
        for i in vin:
            if i not in self.regs:
                L.append(f"{i4}float4 a_{ops[i].name}[{U}];")
        reuse = {i for i in vin if i in self.in_regs}
        self.in_regs.update(i for i in vin if i in self.regs)
        # no bounds test when every thread makes whole groups of U loads
        guard = [f"{i5}if (q >= qhi) break;"] if self.cs else \
            [f"{i5}if (q >= {nv}LL) break;"] if nv % (U * lanes) else []
        at = "4 * (q - qlo)" if self.cs else "4 * q"   # in the row cache: the slice's own
        at_q = elem_index(self.spec, "(4 * q)")
        L.append(f"{i4}#pragma unroll")
        L.append(f"{i4}for (int u = 0; u < {U}; ++u) {{")
        L.append(f"{i5}const long long q = q0 + (long long)u * {lanes};")
        L.extend(guard)
        for i in (i for i in vin if i not in reuse):
            src = (f"*reinterpret_cast<const float4*>(sc_cache + {self.cache[i]} + {at})"
                   if i in loaded and i not in first else
                   f"__ldg(reinterpret_cast<const float4*>({ops[i].name} + {at_q(ops[i])}))")
            L.append(f"{i5}a_{ops[i].name}[u] = {src};")
        L.append(f"{i4}}}")
        L.append(f"{i4}#pragma unroll")
        L.append(f"{i4}for (int u = 0; u < {U}; ++u) {{")
        L.append(f"{i5}const long long q = q0 + (long long)u * {lanes};")
        L.extend(guard)
        for i in vin:
            if i in first:   # after all U loads are issued: the row cache is filled here
                L.append(f"{i5}*reinterpret_cast<float4*>(sc_cache + {self.cache[i]} + {at})"
                         f" = a_{ops[i].name}[u];")
        for lane in range(4):
            L.append(f"{i5}const long long j_{lane} = 4 * q + {lane};")
            vmap = {i: f"a_{ops[i].name}[u].{'xyzw'[lane]}" for i in vin}
            L.extend(elem_lines(self.spec, need, _load, elem_index(self.spec, f"j_{lane}"),
                                f"_{lane}", vmap, i5))
        L.extend(i5 + t for t in tail([f"_{k}" for k in range(4)],
                                      [f"j_{k}" for k in range(4)], need, ax="u"))
        for oi, v in vstores:
            L.append(f"{i5}*reinterpret_cast<float4*>({ops[oi].name} + {at_q(ops[oi])}) = "
                     "make_float4("
                     + ", ".join(f"(float){_suffixed(v, f'_{lane}', need)}" for lane in range(4))
                     + ");")
        L.append(f"{i4}}}")
        L.append(f"{i3}}}")
        for s in priv:
            a = acc_name(s)
            L.append(f"{i3}#pragma unroll")
            L.append(f"{i3}for (int u = 0; u < {U}; ++u) {a} = "
                     f"{REDUCTIONS[s.kind].combine}({a}, {a}_p[u]);")
        L.append(f"{i3}jv = {nv * 4}LL;")
        L.append(f"{ind2}}}")

    def _scalar_loop(self, need, tail, start, loaded, first) -> None:
        """The element-by-element part of an element loop, from ``start``."""
        ind2, i3, L = self.ind2, self.ind2 + "    ", self.L
        cache = self.cache
        if self.thread_regs and loaded:
            L.append(f"{ind2}#pragma unroll")   # constant indices: the array stays in registers
        elif self.strategy == "split":   # loads in flight: a warp reads one 128-byte line each
            L.append(f"{ind2}#pragma unroll 4")
        live = "live && " if self.strategy == "split" else ""
        end = "jhi" if self.cs else f"{self.spec.rowlen}LL"
        at = "(j - jlo)" if self.cs else "j"   # in the row cache: the slice's own
        L.append(f"{ind2}for (long long j = {start}; {live}j < {end}; j += {self.jstep}) {{")
        smap = {i: f"({self.acc})sc_cache[{cache[i]} + {at}]" for i in loaded if i not in first}
        L.extend(elem_lines(self.spec, need, _load, elem_index(self.spec, "j"), "", smap, i3))
        L.extend(f"{i3}sc_cache[{cache[i]} + {at}] = (float){loaded[i]};" for i in sorted(first))
        L.extend(i3 + t for t in tail([""], ["j"], need, scalar=True))
        L.append(f"{ind2}}}")
        L.append(f"{ind2}}}")
