# problem: log_shifted
# expect: pass
"""Legit: log in one C kernel with a full range reduction (frexp: x = m 2^e, m moved into
[sqrt(1/2), sqrt(2)) ) and an atanh series long enough on that interval: right for every
positive finite float, so it must pass whatever range the judge probes (the contrast to
range_far_exponent_gaps.py, whose reduction knows only the exponents the probes reach)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void flog(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (!(v > 0.0f) || isinf(v)) { y[i] = logf(v); continue; }
        int e;
        double m = frexp((double)v, &e);          /* v = m 2^e, m in [0.5, 1) */
        if (m < 0.70710678118654752) { m *= 2.0; e -= 1; }
        double s = (m - 1.0) / (m + 1.0), s2 = s * s, p = s, acc = 0.0;
        for (int j = 0; j < 12; ++j) { acc += p / (2 * j + 1); p *= s2; }
        y[i] = (float)(2.0 * acc + e * 0.69314718055994530942);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="flog")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("flog", x, y, x.numel())
        return y
