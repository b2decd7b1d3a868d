# problem: norm
# expect: pass
"""Legit: keeps a scratch buffer (per-row inverse RMS) across calls and reuses it; only the
output is fresh each call, so reuse of private memory is not mistaken for a cached result."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void inv_rms(const float* x, float* r, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += (double)x[i * cols + j] * x[i * cols + j];
        r[i] = 1.0f / sqrtf((float)(s / cols) + 1e-5f);
    }
}
void apply(const float* x, const float* r, const float* w, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r[i] * w[j];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="rms_two_pass")
        self.scratch = torch.empty(0)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        if self.scratch.numel() < rows:
            self.scratch = torch.empty(rows)
        y = torch.empty_like(x)
        self.mod.call("inv_rms", x, self.scratch, rows, cols)
        self.mod.call("apply", x, self.scratch, self.weight, y, rows, cols)
        return y
