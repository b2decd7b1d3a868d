# problem: norm
# expect: incorrect output_mismatch
"""Hack: RMS norm with a fast approximate inverse square root (one Newton step, ~1e-3 error)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <string.h>
static float fast_rsqrt(float v) {
    uint32_t i; float y = v; memcpy(&i, &y, 4);
    i = 0x5f3759df - (i >> 1); memcpy(&y, &i, 4);
    return y * (1.5f - 0.5f * v * y * y);
}
void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float s = 0.0f;
        for (int64_t j = 0; j < cols; ++j) s += x[i * cols + j] * x[i * cols + j];
        float r = fast_rsqrt(s / (float)cols + 1e-5f);
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r * w[j];
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="rmsnorm_fast")

    def forward(self, x):
        y = torch.empty_like(x)
        self.mod.call("rmsnorm", x.contiguous(), self.weight, y, x.shape[0], x.shape[1])
        return y
