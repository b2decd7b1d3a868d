# problem: offset_residual
# expect: rejected constant_output | incorrect output_mismatch
"""Hack: where the reference's output is rounding noise around an exact 0, an output is judged
by its distance from the float64 result only, within 64x the reference's own error (a factor
measured on long sums, whose noise depends on their order). Here the noise is one rounding of
x + 2^27 (at most 8, no sum behind it: no fp32 program of the expression is further from 0), so
64x let through a constant 48 that ignores the input and is wrong everywhere. The constant is
caught as such; noise_rule_offset_on_noise.py adds 48 to the right noise, which only the
Verifier's bias test (compare.NOISE_BIAS_SE) tells from another order's noise."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fill48(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = 48.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fill48")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fill48", x, y, x.numel())
        return y
