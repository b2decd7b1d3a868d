# problem: pointwise
# expect: pass
"""Legit: an NVRTC kernel whose head has attributes with arguments before its name (a
thread-block cluster's ``__cluster_dims__`` through a macro, and ``__launch_bounds__``), as
the offline Coder's long-row kernels have: the trace check must find the kernel by its name,
not take the macro for it (it did, and rejected such programs as untraced compute)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#define PAIRS __cluster_dims__(2, 1, 1)
extern "C" __global__ void __launch_bounds__(256) PAIRS paired(const float* x, float* y,
                                                              long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="paired")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        blocks = (n + 255) // 256
        blocks += blocks % 2   # whole clusters of two
        self.mod.launch("paired", grid=(blocks, 1, 1), block=(256, 1, 1), args=(x, y, n))
        return y
