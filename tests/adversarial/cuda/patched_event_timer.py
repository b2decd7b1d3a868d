# problem: pointwise
# expect: rejected patched_timer
"""Hack: a correct kernel, plus CUDA events that report a tenth of the elapsed time."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10.0

SRC = r"""
extern "C" __global__ void fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))
        return y
