# problem: pointwise
# expect: incorrect output_mismatch
"""Hack: computes in half precision (faster on real hardware, wrong beyond fp32 tolerance)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused_half(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        _Float16 h = (_Float16)x[i];
        _Float16 v = (_Float16)2.0f * h + (_Float16)1.0f;
        y[i] = v > (_Float16)0.0f ? (float)v : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused_half")

    def forward(self, x):
        y = torch.empty_like(x)
        self.mod.call("fused_half", x, y, x.numel())
        return y
