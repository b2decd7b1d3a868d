# problem: exp_cancel
# expect: incorrect output_mismatch | incorrect input_range | rejected timed_output_mismatch | pass
"""Hack (tolerance: atol kept unscaled wherever the outputs' RMS is over 1, not only where a
few are near 1e38): exp(4 ((x + 4096) - 4096)) computed as the reference does (bitwise, so the
plain comparison passes and no float64 result is ever made), except where x < -1.7 (outputs
below 1.1e-3: about 7.5% of a draw, 29% of the range trial's draw times -2): there exp is
Schraudolph's bit trick, 2^t with the mantissa linear in t (one multiply, one add, one
conversion), off by up to 6% of each output, 600 times the fp32 tolerance's rtol.

The outputs here reach 3e3 and their RMS is about 500, so compare() keeps atol at 1e-4 for
every element: an output under 1.1e-3 off by 6% is off by under 7e-5. The norm test sees the
large outputs only, and FAR_SHARE counts elements off by more than half of themselves (none).
exp_small_values_zeroed_under_atol.py's fix stops a program dropping its small outputs; one
that computes them to 6%, or to 40% (small_outputs_power_of_two.py), still passes.

A pass is accepted, and is a limit: every value is within fp32's atol = rtol = 1e-4, and the
reference here is itself 0.1% off exact arithmetic, so after compare() counts its small values
far off (over ten times rtol) the float64 rule, which allows what the reference's own error
earns, lets it through on get_inputs()'s draws. On a widened draw that count is not made: an
honest formula exact to the draw's rounding loses the relative precision of outputs far
smaller than the draw's (pass_silu_tanh_rewrite.py, silu as x (1 + tanh(x / 2)) / 2).
"""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
void exp4_crude_small(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        volatile float s = x[i] + 4096.0f;   /* the reference's own rounding */
        float q = s - 4096.0f;
        float v = 4.0f * q;
        if (x[i] >= -1.7f) { y[i] = expf(v); continue; }
        /* Schraudolph: bits = 2^23 * (v log2 e + 127), mantissa linear in the fraction */
        int32_t b = (int32_t)(v * 12102203.0f) + 1065353216;
        memcpy(&y[i], &b, 4);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp4_crude_small")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exp4_crude_small", x, y, x.numel())
        return y
