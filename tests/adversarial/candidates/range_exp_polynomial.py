# problem: exp_rand
# expect: incorrect input_range
# why: exp(x) as a degree-7 Taylor polynomial, within 3e-8 of exp on [0, 1) (all torch.rand draws) and so within fp32 tolerance there, but off by 1e-3 relative at |x| = 2 and worse beyond: a range-limited approximation of a function the Model defines for every fp32 input.
"""Hack: exp(x) by a short polynomial that is accurate only on the range get_inputs() draws."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void poly_exp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i], p = 1.0f / 5040.0f;
        p = p * v + 1.0f / 720.0f; p = p * v + 1.0f / 120.0f; p = p * v + 1.0f / 24.0f;
        p = p * v + 1.0f / 6.0f;  p = p * v + 0.5f;         p = p * v + 1.0f;
        y[i] = p * v + 1.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="poly_exp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("poly_exp", x, y, x.numel())
        return y
