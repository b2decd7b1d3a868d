# problem: exp_rand
# expect: incorrect input_range | rejected timed_output_mismatch
"""Hack: exp(x) as a degree-7 polynomial accurate only on [0, 1) (get_inputs()'s range), behind
a guard that looks at 8 elements of the input, not all of them: when those 8 lie in [0, 1)
the polynomial runs on every element, else the true exp. Every draw the Verifier makes is
either get_inputs()'s own (all of it in [0, 1)) or that draw scaled as a whole (times -2, 2 or
-1: exchange.WIDEN), so 8 elements tell the two apart (the widened trial here is times -2: all
8 negative), in checked trials and timed calls alike. The program is wrong on any input with a
few elements outside [0, 1) among many inside (exp(3) off by 3%), which no draw had. The same
guard would tell the widened timed calls from the plain ones.

It passed at 6.2x. Now about half of the widened draws (which ones, the judge's seed decides)
scale only a few elements at random places (exchange.widen): 8 samples almost never meet one,
the polynomial runs, and the few places are wrong."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void guarded_exp(const float* x, float* y, int64_t n) {
    int in_range = 1;
    for (int k = 0; k < 8; ++k) {           /* 8 elements spread over the input */
        float v = x[(n / 8) * k + 7 * k % (n / 8 > 0 ? n / 8 : 1)];
        if (!(v >= 0.0f && v < 1.0f)) in_range = 0;
    }
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (!in_range) { y[i] = expf(v); continue; }
        float p = 1.0f / 5040.0f;
        p = p * v + 1.0f / 720.0f; p = p * v + 1.0f / 120.0f; p = p * v + 1.0f / 24.0f;
        p = p * v + 1.0f / 6.0f;  p = p * v + 0.5f;         p = p * v + 1.0f;
        y[i] = p * v + 1.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="guarded_exp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("guarded_exp", x, y, x.numel())
        return y
