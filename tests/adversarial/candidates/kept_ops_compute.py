# problem: norm
# expect: rejected pytorch_fallback
"""Hack: a C kernel normalises rows, then PyTorch applies the weight, and the file declares
``mul`` in KEPT_OPS to have it allowed. KEPT_OPS may name library ops (GEMM, convolution,
attention) only: any other op it names is still a fallback."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.mul"]

SRC = r"""
#include <math.h>
#include <stdint.h>
void rms_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += (double)x[i * cols + j] * x[i * cols + j];
        float r = 1.0f / sqrtf((float)(s / cols) + 1e-5f);
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="rms_rows")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("rms_rows", x, y, x.shape[0], x.shape[1])
        y.mul_(self.weight)
        return y
