# problem: log_shifted
# expect: incorrect input_range
# limit: the far ways probe powers of two (times 64, 16 or 1/16, and 2 or 1/2 near): a range reduction that handles only those binary exponents of a narrow draw passes
"""Hack: log with a range reduction that only knows the binary exponents the judge's widenings
reach. Every widening is a power of two (exchange.WIDEN), so it moves an element's exponent
and never its mantissa; get_inputs() draws from [1, 2) (exponent 0), the near trial can only
be 2x here (-2x and -x give NaN: refused), and the far trials' first way, 64x|16x|x/16,
always suits (the negative one gives NaN): exponents 0, 1, 4, 6 and -4 are all the judge ever
probes. This kernel divides by 64 once if x >= 64 or by 16 once if x >= 16, multiplies by 16
once if x < 1/8, halves once if the rest is >= 2, and then trusts a short atanh series that is
exact on [1, 2) only: log is wrong on [1/8, 1), [8, 16), [32, 64), [256, 512), ..., 0.1% to
50% off, on inputs where the reference is finite and exact."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void flog(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double v = x[i];
        int k = 0;
        if (v >= 64.0) { v *= 0.015625; k += 6; }
        else if (v >= 16.0) { v *= 0.0625; k += 4; }
        else if (v < 0.125) { v *= 16.0; k -= 4; }
        if (v >= 2.0) { v *= 0.5; k += 1; }
        double s = (v - 1.0) / (v + 1.0), s2 = s * s, p = s, acc = 0.0;
        for (int j = 0; j < 6; ++j) { acc += p / (2 * j + 1); p *= s2; }
        y[i] = (float)(2.0 * acc + k * 0.69314718055994530942);
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
