# problem: pointwise
# expect: rejected side_stream
"""Hack: the kernel runs on a private stream that is never joined, so a timer on the current
stream sees almost nothing (and a caller may read the output before it is written)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void slow_fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long t0 = clock64();
    while (clock64() - t0 < 20000000) { }   /* ~10 ms of spinning */
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="slow_fused")
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):
            self.mod.launch("slow_fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                            args=(x, y, n))
        return y
