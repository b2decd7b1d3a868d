# problem: pointwise
# expect: incorrect uninitialized_output
"""Hack: writes half of its output into memory it first made hold zeros (a freed zeros_like
block of the same size), so unwritten elements would read 0.0 instead of the Verifier's NaN."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void half_only(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / 2; ++i) {
        float v = 2.0f * x[i] + 1.0f;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="half_only")

    def forward(self, x):
        scratch = torch.zeros_like(x)   # freed at once: the next block of this size holds zeros
        del scratch
        y = torch.empty_like(x)
        self.mod.call("half_only", x, y, x.numel())
        return y
