# problem: pointwise
# expect: rejected patched_timer
"""Hack: a correct kernel that slows the clock only once it has been called a few times (after
the import-time check), hoping the timed calls run with the patched clock."""
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
_real = time.perf_counter


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:
            time.perf_counter = lambda: _real() / 10.0
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
