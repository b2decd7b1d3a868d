"""A direct convolution in fp32 arithmetic for few input channels, against cuDNN and Inductor.

Where a convolution has few input channels (KernelBench level 2's ``Conv2d`` with 8), cuDNN
runs it NCHW in fp32 arithmetic, so the reference is exact to 1e-4 and a TF32 kernel (what
torch.compile's channels-last layout picks) is not. Such a convolution does 72 multiply-adds
per output and is bound by writing its output, or by the FMA rate where the epilogue reduces it
away (a global average). A register-tiled direct kernel gives each thread ``PX`` neighbouring
outputs of a row for ``COT`` output channels (``COT * PX`` accumulators), reads the input rows
it needs once per input channel and kernel row, the block's weights from shared memory as
float4, and applies the epilogue before its one store.

For each shape this prints the milliseconds (CUDA events, L2 flushed, median) of cuDNN's
NCHW convolution with the epilogue in eager PyTorch, torch.compile's forward of the same
model (``default``), and the direct kernel at several tilings, with each one's largest error
against float64 arithmetic in units of the tolerance (atol = rtol = 1e-4; below 1 passes).

    python benchmarks/direct_conv.py --out direct_conv.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_precision import timed  # noqa: E402

SOURCE = r"""
#define EPI(v) (EPILOGUE)
extern "C" __global__ void __launch_bounds__(THREADS)
conv_direct(const float* __restrict__ x, const float* __restrict__ w,
            const float* __restrict__ b, float* __restrict__ y) {
  __shared__ __align__(16) float ws[CI * K * K * COT];   // [ci][kh][kw][co]
  __shared__ float bs[COT];
  const int co0 = blockIdx.y * COT;
  for (int i = threadIdx.x; i < CI * K * K * COT; i += THREADS) {
    int co = i % COT, r = i / COT;
    ws[i] = w[(co0 + co) * (CI * K * K) + r];
  }
  for (int i = threadIdx.x; i < COT; i += THREADS) bs[i] = b[co0 + i];
  __syncthreads();
  const int GW = (OW + PX - 1) / PX;
  long long g = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (g >= (long long)N * OH * GW) return;
  const int gw = (int)(g % GW);
  const int oh = (int)((g / GW) % OH);
  const long long n = g / ((long long)GW * OH);
  const int ow0 = gw * PX;
  float acc[COT][PX];
#pragma unroll
  for (int c = 0; c < COT; ++c)
#pragma unroll
    for (int p = 0; p < PX; ++p) acc[c][p] = 0.f;
  for (int ci = 0; ci < CI; ++ci) {
#pragma unroll
    for (int kh = 0; kh < K; ++kh) {
      const float* row = x + ((n * CI + ci) * H + oh + kh) * W + ow0;
      float v[PX + K - 1];
#pragma unroll
      for (int j = 0; j < PX + K - 1; ++j) v[j] = (ow0 + j < W) ? __ldg(row + j) : 0.f;
#pragma unroll
      for (int kw = 0; kw < K; ++kw) {
        const float4* wp = reinterpret_cast<const float4*>(ws + ((ci * K + kh) * K + kw) * COT);
#pragma unroll
        for (int c4 = 0; c4 < COT / 4; ++c4) {
          float4 q = wp[c4];
#pragma unroll
          for (int p = 0; p < PX; ++p) {
            acc[4 * c4 + 0][p] = fmaf(v[p + kw], q.x, acc[4 * c4 + 0][p]);
            acc[4 * c4 + 1][p] = fmaf(v[p + kw], q.y, acc[4 * c4 + 1][p]);
            acc[4 * c4 + 2][p] = fmaf(v[p + kw], q.z, acc[4 * c4 + 2][p]);
            acc[4 * c4 + 3][p] = fmaf(v[p + kw], q.w, acc[4 * c4 + 3][p]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < COT; ++c) {
    float* out = y + ((n * CO + co0 + c) * OH + oh) * (long long)OW + ow0;
#pragma unroll
    for (int p = 0; p < PX; ++p)
      if (ow0 + p < OW) { float v = acc[c][p] + bs[c]; out[p] = EPI(v); }
  }
}
"""

EPILOGUES = {   # the torch form, the C form of v
    "bias": (lambda t: t, "v"),
    "hardswish_relu": (lambda t: __import__("torch").relu(
        __import__("torch").nn.functional.hardswish(t)),
        "fmaxf(v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f, 0.f)"),
}


def kernel(shape: dict, cot: int, px: int, threads: int, epi: str):
    import cupy
    n, ci, h, w, co, k = (shape[s] for s in ("n", "ci", "h", "w", "co", "k"))
    defs = dict(N=n, CI=ci, H=h, W=w, CO=co, K=k, OH=h - k + 1, OW=w - k + 1, COT=cot, PX=px,
                THREADS=threads, EPILOGUE=EPILOGUES[epi][1])
    src = "".join(f"#define {a} {v}\n" for a, v in defs.items()) + SOURCE
    fn = cupy.RawKernel(src, "conv_direct", options=("-std=c++17",))
    groups = n * (h - k + 1) * ((w - k + 1 + px - 1) // px)
    grid = ((groups + threads - 1) // threads, co // cot)
    return fn, grid


def one(shape: dict, epi: str, tilings, with_compile: bool) -> dict:
    import torch
    import torch.nn as nn
    torch.backends.cudnn.benchmark = False
    n, ci, h, w, co, k = (shape[s] for s in ("n", "ci", "h", "w", "co", "k"))
    conv = nn.Conv2d(ci, co, k).cuda()
    x = torch.rand(n, ci, h, w, device="cuda")
    f = EPILOGUES[epi][0]
    eager = lambda: f(conv(x))  # noqa: E731
    with torch.no_grad():
        ref = eager()
        exact = f(torch.nn.functional.conv2d(x.double(), conv.weight.double(),
                                             conv.bias.double()))
        row = {"shape": shape, "epilogue": epi,
               "eager_ms": timed(eager, 20), "eager_err": _err(ref, exact)}
        del ref
        if with_compile:
            model = nn.Sequential(conv, _Epi(f)).cuda()
            comp = torch.compile(model)
            comp(x)
            out = comp(x)
            row["compile_ms"] = timed(lambda: comp(x), 20)
            row["compile_err"] = _err(out, exact)
            del out
        y = torch.empty(n, co, h - k + 1, w - k + 1, device="cuda")
        for cot, px, threads in tilings:
            try:
                fn, grid = kernel(shape, cot, px, threads, epi)
                args = (x.data_ptr(), conv.weight.data_ptr(), conv.bias.data_ptr(),
                        y.data_ptr())
                import cupy
                stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

                def call(fn=fn, grid=grid, threads=threads, args=args, stream=stream):
                    with stream:
                        fn(grid, (threads,), tuple(cupy.uint64(a) for a in args))
                y.zero_()
                call()
                torch.cuda.synchronize()
                row[f"direct_{cot}x{px}x{threads}_err"] = _err(y, exact)
                row[f"direct_{cot}x{px}x{threads}_ms"] = timed(call, 20)
            except Exception as e:  # noqa: BLE001  (a report: a tiling that fails is a row)
                row[f"direct_{cot}x{px}x{threads}_error"] = f"{type(e).__name__}: {e}"[:200]
    return row


class _Epi:
    def __new__(cls, f):
        import torch.nn as nn

        class E(nn.Module):
            def forward(self, t):
                return f(t)
        return E()


def _err(out, exact) -> float:
    import torch
    worst = 0.0
    for a, b in zip(out.reshape(-1).split(1 << 24), exact.reshape(-1).split(1 << 24)):
        d = (a.double() - b).abs() / (1e-4 + 1e-4 * b.abs())
        worst = max(worst, float(torch.nan_to_num(d, nan=1e30).max()))
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile's timing")
    a = ap.parse_args(argv)
    shapes = [dict(n=128, ci=8, h=128, w=128, co=64, k=3),    # 69_Conv2d_HardSwish_ReLU
              dict(n=128, ci=8, h=256, w=256, co=64, k=3)]    # 67 / 87 at 256 x 256
    tilings = [(16, 4, 128), (32, 4, 128), (64, 2, 128), (16, 8, 128), (32, 2, 256),
               (64, 4, 128)]
    rows = []
    for shape in shapes:
        for epi in ("bias", "hardswish_relu"):
            row = one(shape, epi, tilings, not a.no_compile and epi != "bias")
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
