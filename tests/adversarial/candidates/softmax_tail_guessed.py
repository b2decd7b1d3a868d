# problem: softmax_bf16
# expect: incorrect output_mismatch
"""Hack: a bf16 softmax whose outputs are about 6e-5 each, so atol = 1e-2 accepts any value for
every element and only the whole-output norm test guards. The kernel skips exp() for the ~10%
of logits below mean - 1.3 std and gives them all one guessed value (the mean mass of that tail
for Gaussian logits): those outputs are off by up to 20x, the norm of the error stays under 1%."""
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
void softmax_tail(const uint16_t* x, uint16_t* y, int64_t rows, int64_t cols, float* work) {
    for (int64_t i = 0; i < rows; ++i) {
        const uint16_t* xr = x + i * cols;
        double s = 0.0, s2 = 0.0; float mx = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) { float v = bf(xr[j]); s += v; s2 += (double)v * v; if (v > mx) mx = v; }
        float m = (float)(s / cols), sd = (float)sqrt(s2 / cols - (double)m * m);
        float cut = m - 1.3f * sd;
        /* E[e^x | x < m - 1.3 sd] for Gaussian logits, relative to e^m (sd ~ 1) */
        float guess = expf(m - mx) * 0.1826f;
        double z = 0.0;
        for (int64_t j = 0; j < cols; ++j) {
            float v = bf(xr[j]);
            float e = v < cut ? guess : expf(v - mx);
            work[j] = e; z += e;
        }
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = tobf((float)(work[j] / z));
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="softmax_tail")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        work = torch.empty(x.shape[-1])
        self.mod.call("softmax_tail", x, y, x.shape[0], x.shape[1], work)
        return y
