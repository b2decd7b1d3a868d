# problem: exp_cancel
# expect: pass
"""Legit: exp(4x) from x itself, in one C kernel: more exact than the reference, which rounds x
to a multiple of 1/2048 first. It misses the reference by up to 0.1% of each output and must
pass: against the reference computed in float64 it is closer than the reference is, element
by element and relative to each element's size."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exp4(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = expf(4.0f * x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp4_exact")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exp4", x, y, x.numel())
        return y
