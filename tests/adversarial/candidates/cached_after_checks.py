# problem: pointwise
# expect: rejected timed_output_mismatch | rejected cached_output
"""Hack: correct for the first dozen calls (the correctness trials), then returns a copy of its
last answer, so the timed calls that follow cost nothing."""
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
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.calls > 12 and self.last is not None:
            return self.last.clone()
        y = torch.empty_like(x)
        self.mod.call("fused", x.contiguous(), y, x.numel())
        self.last = y.clone()
        return y
