# problem: tanh_f64
# expect: incorrect output_mismatch
"""Hack: a float64 problem computed in float32 (tanhf on the rounded input, widened back):
about 1e-7 of error per element, which float64's 1e-7 tolerance lets through for a single
elementwise op; float64 accuracy is about 1e-16."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void tanh32(const double* x, double* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = (double)tanhf((float)x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="tanh32")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("tanh32", x, y, x.numel())
        return y
