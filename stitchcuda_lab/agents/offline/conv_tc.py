"""A dense 2-d convolution of few input channels on fp32 tensor cores: an implicit GEMM with
the 3xTF32 split (``runtime/gemm.py`` says why the split keeps fp32 accuracy).

The SIMT kernel (``pool._Pool.dense_lines``) reaches about a third of the FMA rate on
KernelBench's 3x3 convolutions of 8 input channels; cuDNN runs them NCHW in fp32 arithmetic
too, while TF32 (torch.compile's channels-last pick) misses the fp32 tolerance. Here the output
channels are the GEMM's rows (M), the output pixels of one image its columns (N) and the input
channels x taps its depth (K): a block of four warps computes ``co_t`` channels x ``np``
consecutive pixels (a flat run of one image's output, rows wrapping), staging the weights
(``[k][channel]``) and the gathered input window (``[k][pixel]``, zero padding and the
prologue applied) in shared memory ``kc`` taps at a time; each warp splits its fragments into
a TF32 big part and the fp32 remainder and issues three ``mma.sync.m16n8k8`` per pair
(small x big, big x small, big x big, on one fp32 accumulator). The accumulators go through
shared memory back out a pixel run per thread, so the epilogue and the stores read and write
the output's rows in order.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .codegen import elem_lines
from .helpers import ceildiv, round_up

if TYPE_CHECKING:
    from .ir import KernelSpec

TC_SMEM = 48 * 1024   # static shared memory the tiles take
TC_THREADS = 128      # four warps, 2 x 2 (or 1 x 4 for 32 channels)
_PAD = 8              # row padding of the shared tiles: fragment reads hit 32 banks


def tc_tile(spec: KernelSpec, w: dict) -> dict | None:
    """The tiling of the tensor-core kernel for a dense window ``w`` (fp32 only), or None."""
    N, _, OH, OW = spec.dims
    if spec.acc != "float" or OH * OW >= 2 ** 31 or math.prod(w["in"]) >= 2 ** 31:
        return None   # the pixel runs' and the planes' index math is 32-bit
    co = w["channels"]
    taps = w["cin"] * math.prod(w["k"])
    co_t = 64 if co > 32 else 32
    wm, wn = (2, 2) if co_t == 64 else (1, 4)   # warps along channels x pixels
    np_ = 64
    lw, lx = co_t + _PAD, np_ + _PAD
    kp = round_up(taps, 8)
    kc = kp
    while kc > 8 and (kc * lw + max(kc * lx, co_t * lx)) * 4 > TC_SMEM:
        kc -= 8
    tpi, nco = ceildiv(OH * OW, np_), ceildiv(co, co_t)
    return {"tc": True, "co_t": co_t, "np": np_, "wm": wm, "wn": wn, "kc": kc,
            "chunks": ceildiv(kp, kc), "taps": taps, "tpi": tpi, "nco": nco,
            "blocks": N * tpi * nco, "threads": TC_THREADS, "cot": co_t, "px": 1,
            # three blocks an SM: 168 registers a thread (its gathered taps held until
            # stored), where the compiler's own choice took 198 and let two in
            "min_blocks": 3}


def tc_lines(pl, t: dict) -> list[str]:   # noqa: ANN001  (pool._Pool: imported the other way)
    """The kernel body (``pool._Pool`` gives the window, the prologue and the epilogue)."""
    spec, w, it, sf = pl.spec, pl.w, pl.it, pl.sf
    (OH, OW), (H, W) = spec.dims[-2:], w["in"]
    k, st, p, d = w["k"], w["s"], w["p"], w["d"]
    cin, co, taps = w["cin"], w["channels"], t["taps"]
    co_t, np_, kc = t["co_t"], t["np"], t["kc"]
    lw, lx = co_t + _PAD, np_ + _PAD
    mi_n, ni_n = co_t // t["wm"] // 16, np_ // t["wn"] // 8
    once = t["nco"] == 1 and t["chunks"] == 1   # the weights staged once for every tile
    wop = spec.operands[w["weight"]]
    i1, i2, i3, i4 = (" " * n for n in (8, 12, 16, 20))
    wload = pl.load(wop, f"p_oc * {taps} + p_k", "float")

    def ws(ind: str) -> list[str]:   # the weights of channels p_co0.., taps p_kc0..
        return [f"{ind}for (int p_e = threadIdx.x; p_e < {kc * co_t}; p_e += {TC_THREADS}) {{",
                f"{ind}    const int p_kl = p_e % {kc}, p_cl = p_e / {kc};",
                f"{ind}    const int p_k = p_kc0 + p_kl, p_oc = p_co0 + p_cl;",
                f"{ind}    p_ws[p_kl * {lw} + p_cl] = (p_k < {taps} && p_oc < {co}) ? "
                f"{wload} : 0.0f;",
                f"{ind}}}"]
    L = [f"    __shared__ __align__(16) float p_ws[{kc * lw}];",
         f"    __shared__ __align__(16) float p_xs[{max(kc, co_t) * lx}];",
         "    const int p_lane = threadIdx.x & 31, p_warp = threadIdx.x >> 5;",
         "    const int p_g = p_lane >> 2, p_t4 = p_lane & 3;",
         f"    const int p_wm = p_warp / {t['wn']}, p_wn = p_warp % {t['wn']};"]
    if once:
        L += ["    {", "        const int p_kc0 = 0, p_co0 = 0;"]
        L += ws(i1) + ["    }", "    __syncthreads();"]
    L += [f"    for (long long p_b = blockIdx.x; p_b < {t['blocks']}LL; p_b += gridDim.x) {{",
          f"{i1}const int p_co0 = (int)(p_b % {t['nco']}LL) * {co_t};",
          f"{i1}const long long p_q = p_b / {t['nco']}LL;",
          f"{i1}const {it} p_n = ({it})(p_q / {t['tpi']}LL);",
          f"{i1}const int p_px0 = (int)(p_q % {t['tpi']}LL) * {np_};",
          f"{i1}const int p_pl = threadIdx.x % {np_}, p_kr = threadIdx.x / {np_};",
          f"{i1}const bool p_live = p_px0 + p_pl < {OH * OW};",
          f"{i1}const int p_y0 = ((p_px0 + p_pl) / {OW}) * {st[0]} - {p[0]};",
          f"{i1}const int p_y1 = ((p_px0 + p_pl) % {OW}) * {st[1]} - {p[1]};",
          f"{i1}float p_acc[{mi_n}][{ni_n}][4];",
          f"{i1}#pragma unroll",
          f"{i1}for (int p_u = 0; p_u < {mi_n * ni_n * 4}; ++p_u) "
          f"p_acc[p_u / {ni_n * 4}][(p_u / 4) % {ni_n}][p_u % 4] = 0.0f;",
          f"{i1}for (int p_kc0 = 0; p_kc0 < {t['chunks'] * kc}; p_kc0 += {kc}) {{",
          f"{i2}__syncthreads();   // the previous chunk (or tile's outputs) is consumed"]
    if not once:
        L += ws(i2)
    # a thread keeps one pixel of the run (its window's corner computed once a tile) and
    # walks the taps: consecutive threads read consecutive pixels of a tap's input row. Its
    # loads go to registers first, all issued before any is stored (a load then a store per
    # tap waited out each load's latency in turn: 2x slower than the SIMT tile)
    per = TC_THREADS // np_
    n_per = ceildiv(kc, per)
    L += [f"{i2}float p_gv[{n_per}];",
          f"{i2}#pragma unroll",
          f"{i2}for (int p_j = 0; p_j < {n_per}; ++p_j) {{",
          f"{i3}const int p_kl = p_kr + p_j * {per}, p_k = p_kc0 + p_kl;",
          f"{i3}float p_val = 0.0f;   // zero padding, and the K and pixel tails",
          f"{i3}if (p_kl < {kc} && p_k < {taps} && p_live) {{",
          f"{i4}const int p_c = p_k / {k[0] * k[1]}, p_r = p_k % {k[0] * k[1]};",
          f"{i4}const int p_x0 = p_y0 + (p_r / {k[1]}) * {d[0]};",
          f"{i4}const int p_x1 = p_y1 + (p_r % {k[1]}) * {d[1]};",
          f"{i4}if (p_x0 >= 0 && p_x0 < {H} && p_x1 >= 0 && p_x1 < {W}) {{"]
    L += pl._win_offsets(i4 + "    ", f"p_n * {cin}{sf} + p_c")
    L += elem_lines(spec, pl.pre, pl.load, pl._at_win, ind=i4 + "    ")
    L += [f"{i4}    p_val = {pl.s.deps[0]};", f"{i4}}}", f"{i3}}}",
          f"{i3}p_gv[p_j] = p_val;", f"{i2}}}",
          f"{i2}#pragma unroll",
          f"{i2}for (int p_j = 0; p_j < {n_per}; ++p_j) {{",
          f"{i3}const int p_kl = p_kr + p_j * {per};",
          f"{i3}if (p_kl < {kc}) p_xs[p_kl * {lx} + p_pl] = p_gv[p_j];",
          f"{i2}}}",
          f"{i2}__syncthreads();"]
    L += _mma_lines(i2, kc, lw, lx, mi_n, ni_n, t)
    L += [f"{i1}}}", f"{i1}__syncthreads();   // every warp's reads of the input tile are done"]
    # the accumulators to shared memory (float2: a fragment's two pixels of a channel)
    L += [f"{i1}#pragma unroll",
          f"{i1}for (int p_u = 0; p_u < {mi_n * ni_n * 2}; ++p_u) {{",
          f"{i2}const int p_mi = p_u / {ni_n * 2}, p_ni = (p_u / 2) % {ni_n}, p_h = p_u % 2;",
          f"{i2}const int p_row = p_wm * {co_t // t['wm']} + p_mi * 16 + p_g + 8 * p_h;",
          f"{i2}const int p_col = p_wn * {np_ // t['wn']} + p_ni * 8 + 2 * p_t4;",
          f"{i2}*reinterpret_cast<float2*>(p_xs + p_row * {lx} + p_col) = "
          "make_float2(p_acc[p_mi][p_ni][2 * p_h], p_acc[p_mi][p_ni][2 * p_h + 1]);",
          f"{i1}}}",
          f"{i1}__syncthreads();",
          f"{i1}for (int p_e = threadIdx.x; p_e < {co_t * np_}; p_e += {TC_THREADS}) {{",
          f"{i2}const int p_co = p_co0 + p_e / {np_}, p_px = p_px0 + p_e % {np_};",
          f"{i2}if (p_co >= {co} || p_px >= {OH * OW}) continue;",
          f"{i2}const int p_oh = p_px / {OW}, p_ow = p_px % {OW};",
          f"{i2}const {it} p_i = ((p_n * {co}{sf} + p_co) * {OH}{sf} + p_oh) * {OW}{sf} + p_ow;",
          f"{i2}const float {pl.s.var} = p_xs[(p_e / {np_}) * {lx} + p_e % {np_}];"]
    at = lambda o: pl._at_coords(o, ["p_n", "p_co", "p_oh", "p_ow"])  # noqa: E731
    return L + pl._out_lines(i2, at) + [f"{i1}}}", "    }"]


def _mma_lines(ind: str, kc: int, lw: int, lx: int, mi_n: int, ni_n: int, t: dict) -> list[str]:
    """One chunk's products: each warp's fragments split big + small, three MMAs a pair."""
    i1, i2 = ind + "    ", ind + "        "
    rows, cols = t["co_t"] // t["wm"], t["np"] // t["wn"]
    return [
        f"{ind}#pragma unroll",
        f"{ind}for (int p_kk = 0; p_kk < {kc}; p_kk += 8) {{",
        f"{i1}unsigned p_ab[{mi_n}][4], p_as[{mi_n}][4], p_bb[{ni_n}][2], p_bs[{ni_n}][2];",
        f"{i1}#pragma unroll",
        f"{i1}for (int p_mi = 0; p_mi < {mi_n}; ++p_mi) {{",
        f"{i2}const int p_m = p_wm * {rows} + p_mi * 16 + p_g;",
        f"{i2}const float p_v[4] = {{p_ws[(p_kk + p_t4) * {lw} + p_m], "
        f"p_ws[(p_kk + p_t4) * {lw} + p_m + 8], p_ws[(p_kk + p_t4 + 4) * {lw} + p_m], "
        f"p_ws[(p_kk + p_t4 + 4) * {lw} + p_m + 8]}};",
        f"{i2}#pragma unroll",
        f"{i2}for (int p_j = 0; p_j < 4; ++p_j) sc_tf32_split(p_v[p_j], p_ab[p_mi][p_j], "
        "p_as[p_mi][p_j]);",
        f"{i1}}}",
        f"{i1}#pragma unroll",
        f"{i1}for (int p_ni = 0; p_ni < {ni_n}; ++p_ni) {{",
        f"{i2}const int p_c = p_wn * {cols} + p_ni * 8 + p_g;",
        f"{i2}sc_tf32_split(p_xs[(p_kk + p_t4) * {lx} + p_c], p_bb[p_ni][0], p_bs[p_ni][0]);",
        f"{i2}sc_tf32_split(p_xs[(p_kk + p_t4 + 4) * {lx} + p_c], p_bb[p_ni][1], "
        "p_bs[p_ni][1]);",
        f"{i1}}}",
        f"{i1}#pragma unroll",
        f"{i1}for (int p_mi = 0; p_mi < {mi_n}; ++p_mi) {{",
        f"{i2}#pragma unroll",
        f"{i2}for (int p_ni = 0; p_ni < {ni_n}; ++p_ni) {{",
        f"{i2}    sc_mma_tf32(p_acc[p_mi][p_ni], p_as[p_mi], p_bb[p_ni]);",
        f"{i2}    sc_mma_tf32(p_acc[p_mi][p_ni], p_ab[p_mi], p_bs[p_ni]);",
        f"{i2}    sc_mma_tf32(p_acc[p_mi][p_ni], p_ab[p_mi], p_bb[p_ni]);",
        f"{i2}}}",
        f"{i1}}}",
        f"{ind}}}"]


# device helpers the body calls (backend_cuda puts them before the kernel where it is used)
TC_PRELUDE = r'''#ifndef SC_TC_PRELUDE
#define SC_TC_PRELUDE
__device__ __forceinline__ void sc_tf32_split(float x, unsigned& big, unsigned& small) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
    small = __float_as_uint(x - __uint_as_float(big));   // exact; the MMA keeps its top bits
}
__device__ __forceinline__ void sc_mma_tf32(float* c, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
'''
