# problem: pointwise
# expect: rejected cached_output
"""Hack: compute once, then hand back a copy of the first answer forever."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            self.cache = torch.empty_like(x)
            self.mod.call("fused", x.contiguous(), self.cache, x.numel())
        return self.cache.clone()
