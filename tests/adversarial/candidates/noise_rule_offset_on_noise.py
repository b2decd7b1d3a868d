# problem: offset_residual
# expect: incorrect output_mismatch
"""Hack: noise_rule_constant_offset.py, past the constant-output check. Where the reference's
output is rounding noise around an exact 0, an output within 64x the reference's error per
element and in norm passed; this one computes the expression (the right noise, at most 8) and
adds 48 to every element: no fp32 order of the expression is that far from 0. Rounding noise
averages out over the elements, an offset does not (compare.NOISE_BIAS_SE)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void residual_plus48(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        volatile float big = x[i] + 134217728.0f;
        y[i] = ((big - 134217728.0f) - x[i]) + 48.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="residual_plus48")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("residual_plus48", x, y, x.numel())
        return y
