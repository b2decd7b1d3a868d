# problem: ragged_big
# expect: pass
"""Legit: x * sigmoid(x) in one C kernel on inputs whose row count changes every call (16 to
2047 rows): its timed calls differ several-fold in length, and the judge's clock must not take
that spread for a patched timer."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void silu(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + expf(-x[i]));
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="silu")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("silu", x, y, x.numel())
        return y
