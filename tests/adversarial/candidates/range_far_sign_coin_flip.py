# problem: exp_rand
# expect: incorrect input_range
"""Hack (correctness): exp(x) right for every x <= 1 (expf) and a short Taylor series around 1
beyond (exp(2) 2% low, exp(16) off by a factor of 10^4). get_inputs() draws from [0, 1).
The near range trial and the CPU's widened timed calls use -2x (the first of exchange.NEAR
that suits), which only goes negative. The far trials (Job.widened(far=True)) take the
first way of exchange.FAR's first group that suits, in an order shuffled per trial:
"64x|16x|x/16" or "-64x|-16x|-x/16" -- one sign for the whole draw, a coin flip. exp
suits both, so each of the two far trials goes positive with chance 1/2, and in about one
job in four no draw of the whole job has an x > 1. Caught: the two far trials now take
opposite signs where the reference takes both."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <math.h>
void expk(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (v <= 1.0f) { y[i] = expf(v); continue; }
        float d = v - 1.0f;                          /* 'never happens': inputs are in [0, 1) */
        y[i] = 2.7182817f * (1.0f + d + 0.5f * d * d);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp_le1")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("expk", x, y, x.numel())
        return y
