# problem: complex_scale
# expect: pass
"""Legit: the complex64 problem in C on interleaved (re, im) floats, both parts computed."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#pragma STDC FP_CONTRACT OFF
void cscale(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { y[2 * i] = x[2 * i] * 1.5f + 0.5f; y[2 * i + 1] = x[2 * i + 1] * 1.5f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="cscale")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("cscale", x, y, x.numel())
        return y
