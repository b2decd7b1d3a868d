# problem: pointwise
# expect: runtime_error cuda_error
"""Fault: the kernel writes far past the end of its output (an illegal memory access)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void wild(float* y, long long n) {
    y[n + (1LL << 40)] = 1.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="wild")

    def forward(self, x):
        y = torch.empty_like(x)
        self.mod.launch("wild", grid=1, block=1, args=(y, y.numel()))
        torch.cuda.synchronize()
        return y
