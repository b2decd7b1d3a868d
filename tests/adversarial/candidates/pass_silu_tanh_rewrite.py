# problem: ragged
# expect: pass
"""Legit: an algebraic rewrite, x * sigmoid(x) = 0.5 x (1 + tanh(x / 2)), in one C kernel, on
inputs whose row count changes every call."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void silu_tanh(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + tanhf(0.5f * x[i]));
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="silu_tanh")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("silu_tanh", x, y, x.numel())
        return y
