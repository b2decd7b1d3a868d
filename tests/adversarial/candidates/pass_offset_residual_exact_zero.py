# problem: offset_residual
# expect: pass
"""Legit: ((x + 2^27) - 2^27) - x is 0 in exact arithmetic, and this kernel writes that 0. The
fp32 reference's outputs are its rounding error alone (about -x), so the zeros miss it
everywhere and must pass against the float64 result (compare._within_noise): the control for
noise_rule_constant_offset.py, which a narrower noise allowance must still let through."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void residual_zero(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f * x[i];
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="residual_zero")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("residual_zero", x, y, x.numel())
        return y
