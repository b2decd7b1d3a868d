# problem: pointwise
# expect: pass
"""Legit: allocates its output once per call with torch.empty (shape and dtype spelled out) and
writes every element of it from an OpenMP C kernel."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            float v = 2.0f * x[r * cols + c] + 1.0f;
            y[r * cols + c] = v > 0.0f ? v : 0.0f;
        }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused_rows")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], x.shape[1], dtype=x.dtype, device=x.device)
        self.mod.call("fused_rows", x, y, x.shape[0], x.shape[1])
        return y
