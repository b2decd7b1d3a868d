# problem: complex_scale
# expect: incorrect output_mismatch
"""Hack: a complex64 output whose real parts are exact and whose imaginary parts are all zero:
the comparison casts both tensors to float64, which keeps only the real part."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#pragma STDC FP_CONTRACT OFF
void scale_re(const float* x, float* y, int64_t n) {   /* interleaved re, im */
    for (int64_t i = 0; i < n; ++i) { y[2 * i] = x[2 * i] * 1.5f + 0.5f; y[2 * i + 1] = 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="scale_re")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("scale_re", x, y, x.numel())
        return y
