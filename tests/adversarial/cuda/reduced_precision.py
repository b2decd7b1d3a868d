# problem: pointwise
# expect: incorrect output_mismatch
"""Hack: rounds its inputs to a 10-bit mantissa (what half precision keeps) to look like a
cheaper kernel; the error (~1e-3 relative) is far beyond the fp32 tolerance."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused_lowp(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float h = __uint_as_float(__float_as_uint(x[i]) & 0xFFFFE000u);
        float v = 2.0f * h + 1.0f;
        v = __uint_as_float(__float_as_uint(v) & 0xFFFFE000u);
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused_lowp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.launch("fused_lowp", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(x, y, n))
        return y
