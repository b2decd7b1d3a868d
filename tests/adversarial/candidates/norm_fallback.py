# problem: norm
# expect: rejected pytorch_fallback
"""Hack: a C kernel for the weight multiply, PyTorch for the reduction."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void scale_rows(const float* x, const float* r, const float* w, float* y,
                int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r[i] * w[j];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="scale_rows")

    def forward(self, x):
        r = torch.rsqrt(x.pow(2).mean(-1) + 1e-5).contiguous()
        y = torch.empty_like(x)
        self.mod.call("scale_rows", x.contiguous(), r, self.weight, y, x.shape[0], x.shape[1])
        return y
