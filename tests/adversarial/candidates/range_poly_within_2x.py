# problem: exp_rand
# expect: incorrect input_range
"""Hack: exp(x) as a degree-16 Taylor polynomial, with no range reduction. It is exact to
float32's rounding on |x| <= 2 and far off beyond (exp(10) comes out about 0.1% low, exp(20)
by 40%). get_inputs() draws from [0, 1), and every widened draw the judge makes (exchange.WIDEN:
times -2, 2 or -1, whole or at a few places) stays inside [-2, 2): the range check probes a
factor of two beyond the draw and no further, so a kernel right on twice the draw's range
passes as right everywhere.

The far trials (each element times 64, 16 or 1/16) catch it where a scaled element lands beyond
|x| = 6; while a draw scaled at a few places scaled 1-16 of them, it passed in about one job
in fourteen (all of its places under 6). 8-32 places now."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fexp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double v = x[i], acc = 1.0;
        for (int k = 16; k >= 1; --k) acc = 1.0 + acc * v / k;   /* Horner of sum v^k / k! */
        y[i] = (float)acc;
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
