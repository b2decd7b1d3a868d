# problem: gemm
# expect: pass
"""Legit: the GEMM on TF32 tensor cores through runtime.gemm's 3xTF32 split (fp32-accurate,
no global precision switch touched), bias + ReLU in one NVRTC kernel."""
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void bias_relu(float* y, const float* b, long long rows, long long cols) {
    long long n = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = y[i] + b[i % cols];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.mod = runtime.load(SRC, lang="cuda", name="bias_relu")

    def forward(self, x):
        y = runtime.gemm.linear(x, self.fc.weight)
        self.mod.launch("bias_relu", grid=(32, 1, 1), block=(256, 1, 1),
                        args=(y, self.fc.bias, y.shape[0], y.shape[1]))
        return y
