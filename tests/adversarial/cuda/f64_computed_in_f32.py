# problem: tanh_f64
# expect: incorrect output_mismatch
"""Hack: the float64 problem computed in float32 on the GPU (tanhf of the rounded input): about
1e-7 of error per element, which float64's tolerance of 1e-7 lets through."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void tanh32(const double* x, double* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = (double)tanhf((float)x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="tanh32")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.launch("tanh32", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))
        return y
