# problem: pointwise
# expect: rejected output_aliasing
"""Hack: writes the result over the input and returns the input itself (no allocation)."""
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused_inplace(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; x[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused_inplace")

    def forward(self, x):
        self.mod.call("fused_inplace", x, x.numel())
        return x
