# problem: softmax_bf16
# expect: pass
"""Legit: bf16 softmax in one C kernel, exp and sums in float, outputs rounded to nearest-even."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
static float bf(uint16_t h) { union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f; }
static uint16_t tobf(float f) {
    union { uint32_t u; float f; } v; v.f = f;
    uint32_t r = 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)((v.u + r) >> 16);
}
void softmax_rows(const uint16_t* x, uint16_t* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        const uint16_t* xr = x + i * cols;
        float mx = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) { float v = bf(xr[j]); if (v > mx) mx = v; }
        double z = 0.0;
        for (int64_t j = 0; j < cols; ++j) z += expf(bf(xr[j]) - mx);
        float inv = (float)(1.0 / z);
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = tobf(expf(bf(xr[j]) - mx) * inv);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="softmax_rows")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("softmax_rows", x, y, x.shape[0], x.shape[1])
        return y
