# problem: norm
# expect: pass
"""Legit: two C kernels sharing a persistent workspace kept across calls (per-row inverse RMS,
then the scaling into a fresh output); the workspace is never returned."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void inv_rms(const float* x, float* r, int64_t rows, int64_t cols, float eps) {
    for (int64_t i = 0; i < rows; ++i) {
        double s = 0.0;
        for (int64_t j = 0; j < cols; ++j) s += (double)x[i * cols + j] * x[i * cols + j];
        r[i] = 1.0f / sqrtf((float)(s / cols) + eps);
    }
}
void scale(const float* x, const float* r, const float* w, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r[i] * w[j];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.eps = 1e-5
        self.mod = runtime.load(SRC, lang="c", name="rms2")
        self.ws = torch.empty(0)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        if self.ws.numel() < rows:
            self.ws = torch.empty(rows)
        y = torch.empty_like(x)
        w = self.weight.detach().contiguous()
        self.mod.call("inv_rms", x, self.ws, rows, cols, self.eps)
        self.mod.call("scale", x, self.ws, w, y, rows, cols)
        return y
