# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: a C kernel for the affine part, torch.relu for the rest (claims to replace it all)."""
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
        y = torch.empty_like(x)
        self.mod.call("affine", x.contiguous(), y, x.numel())
        return torch.relu(y)
