# problem: pointwise
# expect: pass
"""Legit: allocates its output once per call with torch.empty (shape, dtype and device spelled
out) and writes all of it with a grid-stride NVRTC kernel."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused_gs(const float* x, float* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = 2.0f * x[i] + 1.0f;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused_gs")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], x.shape[1], dtype=x.dtype, device=x.device)
        n = x.numel()
        self.mod.launch("fused_gs", grid=(min(4 * runtime.sm_count(), (n + 255) // 256), 1, 1),
                        block=(256, 1, 1), args=(x, y, n))
        return y
