# problem: pointwise_big
# expect: pass
"""Legit: a kernel that, like cuDNN's deterministic convolutions, takes a slower path when
torch's deterministic mode is on (here: the same sum, in a fixed order, over many passes). The
checked calls run in that mode and the timed calls do not, so the device time of a checked call
is several times the timed median; the device bound must come from timed calls."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused(const float* x, float* y, long long n, long long passes) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const volatile float* vx = x;                // a load per pass, not hoisted
    float v = 0.0f;
    for (long long p = 0; p < passes; ++p) v = 2.0f * vx[i] + 1.0f;   // the same value each pass
    y[i] = v > 0.0f ? v : 0.0f;
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
        passes = 2000 if torch.are_deterministic_algorithms_enabled() else 1
        self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(x, y, n, passes))
        return y
