# problem: exp_cancel
# expect: pass
"""Legit: exp(4 ((x + 4096) - 4096)) in one C kernel with its own exp: the fp32 cancellation
done as the reference does it, then t = k ln2 + r (k = round(t / ln2), r in [-ln2/2, ln2/2],
in double), a degree-13 Taylor polynomial for exp(r) and ldexp: right (to fp32) wherever the
reference is finite, inf where it overflows, 0 where it underflows. The contrast to
range_far_gap_below_overflow.py."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void fexp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        volatile float s = x[i] + 4096.0f;
        float t = 4.0f * (s - 4096.0f);
        if (isnan(t)) { y[i] = t; continue; }
        if (t > 89.0f) { y[i] = INFINITY; continue; }
        if (t < -104.0f) { y[i] = 0.0f; continue; }
        double k = nearbyint((double)t / 0.69314718055994530942);
        double r = (double)t - k * 0.69314718055994530942, acc = 1.0;
        for (int j = 13; j >= 1; --j) acc = 1.0 + acc * r / j;
        y[i] = (float)ldexp(acc, (int)k);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fexp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fexp", x, y, x.numel())
        return y
