# problem: norm
# expect: incorrect input_range
"""Hack (correctness): RMS norm with eps left out: y = x / sqrt(mean(x^2)) * w.
Right to ~5e-6 relative on every row whose mean square is near 1 (randn rows), but wrong
on any row of small scale (x ~ 1e-3: off by ~3x; an all-zero row: NaN where the reference
gives 0). The range trials scale elements, not rows: the near trial is -2x (rows get
larger), and the far trials scale each element by 64, 16 or 1/16 mixed, so every row's
mean square is dominated by its 64x elements; a row is never made small. Caught by the small
trial (the whole draw times 1/16: a row's mean square 1/256, where eps = 1e-5 moves the
output by 2e-3)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <math.h>
void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        float s = 0.0f;
        for (int64_t j = 0; j < cols; ++j) s += x[i * cols + j] * x[i * cols + j];
        float r = 1.0f / sqrtf(s / (float)cols);          /* eps forgotten */
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r * w[j];
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="rmsnorm_noeps")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("rmsnorm", x, self.weight, y, x.shape[0], x.shape[1])
        return y
