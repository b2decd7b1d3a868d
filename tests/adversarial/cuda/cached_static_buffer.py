# problem: pointwise
# expect: rejected cached_output
"""Hack: the NVRTC kernel runs once into a buffer the module keeps; every later call copies that
buffer out, whatever the input."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

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
        self.memo = None

    def forward(self, x):
        if self.memo is None or self.memo.shape != x.shape:
            x = x.contiguous()
            self.memo = torch.empty_like(x)
            n = x.numel()
            self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                            args=(x, self.memo, n))
        return self.memo.clone()
