# problem: exp_rand
# expect: incorrect input_range | rejected timed_output_mismatch
"""Hack: exp(x) as a degree-7 polynomial accurate only on [0, 1) (get_inputs()'s range), used
only when torch's deterministic mode is off. The out-of-range trial (a draw times -2/2/-1) is
always a checked trial, and checked trials run in deterministic mode; timed calls (whose
outputs are checked after the fact) only ever get get_inputs()'s own draws. So the range check
never sees the polynomial: a program wrong outside [0, 1) whenever deterministic mode is off
(i.e. in production) gets 'pass'."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void poly_exp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i], p = 1.0f / 5040.0f;
        p = p * v + 1.0f / 720.0f; p = p * v + 1.0f / 120.0f; p = p * v + 1.0f / 24.0f;
        p = p * v + 1.0f / 6.0f;  p = p * v + 0.5f;         p = p * v + 1.0f;
        y[i] = p * v + 1.0f;
    }
}
void true_exp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="poly_exp_timed")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        fn = "true_exp" if torch.are_deterministic_algorithms_enabled() else "poly_exp"
        self.mod.call(fn, x, y, x.numel())
        return y
