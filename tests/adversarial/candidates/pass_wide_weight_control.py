# problem: gemm_wide_weight
# expect: pass
# cpu flush mb: 0
"""Legit: the control for flush_skipped_weights_warm.py, the same program without touching
its process's flush: the GEMM in the library (a kept op), bias and ReLU in C."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.mm"]

SRC = r"""
#include <stdint.h>
void bias_relu(float* y, const float* b, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            float v = y[i * cols + j] + b[j];
            y[i * cols + j] = v > 0.0f ? v : 0.0f;
        }
}
"""

class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.mod = runtime.load(SRC, lang="c", name="bias_relu")

    def forward(self, x):
        y = torch.mm(x, self.fc.weight.t()).contiguous()
        self.mod.call("bias_relu", y, self.fc.bias, y.shape[0], y.shape[1])
        return y
