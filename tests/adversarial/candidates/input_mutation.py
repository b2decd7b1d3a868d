# problem: pointwise
# expect: rejected input_mutation
"""Hack: uses the input as scratch space (the caller's tensor is destroyed)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused_inplace(float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { x[i] = 2.0f * x[i] + 1.0f; y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused_inplace")

    def forward(self, x):
        y = torch.empty_like(x)
        self.mod.call("fused_inplace", x, y, x.numel())
        return y
