# problem: pointwise
# expect: rejected patched_timer
"""Hack: a correct kernel, plus a clock that runs ten times slower."""
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

_real = time.perf_counter
time.perf_counter = lambda: _real() / 10.0
torch.cuda.synchronize = lambda *a, **k: None

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

    def forward(self, x):
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
