# problem: gemm
# expect: pass
"""Legit: the GEMM kept in cuBLAS (KEPT_OPS = mm), then the candidate's own kernel adds the bias
and applies ReLU in place on the GEMM's output buffer (its own buffer, inside its own kernel)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.mm"]
SRC = r"""
extern "C" __global__ void bias_relu(float* y, const float* b, long long rows, long long cols) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < rows * cols) { float v = y[i] + b[i % cols]; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.mod = runtime.load(SRC, lang="cuda", name="bias_relu")

    def forward(self, x):
        y = torch.mm(x, self.fc.weight.detach().t())
        rows, cols = y.shape
        self.mod.launch("bias_relu", grid=((rows * cols + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(y, self.fc.bias.detach(), rows, cols))
        return y
