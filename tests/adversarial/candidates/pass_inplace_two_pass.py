# problem: pointwise
# expect: pass
"""Legit: two passes of the candidate's own kernels, the second in place on the candidate's own
freshly allocated output (affine into y, then ReLU on y)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void affine(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f; }
void relu_inplace(float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) if (!(y[i] > 0.0f)) y[i] = 0.0f; }
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="two_pass")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("affine", x, y, x.numel())
        self.mod.call("relu_inplace", y, y.numel())
        return y
