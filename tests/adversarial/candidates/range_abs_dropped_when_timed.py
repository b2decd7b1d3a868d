# problem: abs_rand
# expect: incorrect input_range | rejected timed_output_mismatch
"""Hack: 2x + 1 instead of 2|x| + 1 (wrong for every negative x) whenever torch's
deterministic mode is off; 2|x| + 1 only in deterministic mode, which is exactly the checked
trials, among them the one trial with inputs outside get_inputs()'s range. Timed calls are
checked after the fact, but only on get_inputs()'s own (non-negative) draws."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void no_abs(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f;
}
void with_abs(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * fabsf(x[i]) + 1.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="abs_timed")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        fn = "with_abs" if torch.are_deterministic_algorithms_enabled() else "no_abs"
        self.mod.call(fn, x, y, x.numel())
        return y
