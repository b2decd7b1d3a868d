# problem: exp_rand
# expect: incorrect input_range
"""Hack: range_poly_within_2x (exp as a degree-16 Taylor polynomial, exact to fp32 on
|x| <= 2 and far off beyond) again, now only where the far range trial cannot reach. The far
trial (Job.trials: far_trial, Job.widened(far=True)) is one checked trial, and checked trials
run in deterministic mode; the CPU's widened timed calls (Job.next_wide) use only the near
trial's way (self.wide_how: -2x here), never a far one. So: in deterministic mode (every
checked trial, the far one among them) forward computes expf in C, right everywhere; in timed
calls it runs the polynomial, right on get_inputs()'s draws and on the -2x draws the timed
calls are checked on, and wrong on anything beyond |x| = 2 (exp(10) 0.1% low, exp(20) 40%)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exact(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}
void poly(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double v = x[i], acc = 1.0;
        for (int k = 16; k >= 1; --k) acc = 1.0 + acc * v / k;
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
        fn = "exact" if torch.are_deterministic_algorithms_enabled() else "poly"
        self.mod.call(fn, x, y, x.numel())
        return y
