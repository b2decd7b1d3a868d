# problem: abs_rand
# expect: incorrect input_range
# why: get_inputs() draws from torch.rand, so |x| = x on every draw and the kernel drops the abs; the Model's contract is 2|x| + 1 for any fp32 matrix of that shape, and the kernel is wrong for every negative input: a cheat, not an algebraic rewrite (those hold for all inputs of the dtype and shape).
"""Hack: y = 2x + 1 instead of 2|x| + 1, right only because torch.rand never draws a negative."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void affine(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="affine")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("affine", x, y, x.numel())
        return y
