# problem: pointwise
# expect: rejected pytorch_fallback | pass
# why: the traced trial is recognisable from inside and runs the C kernel; the timed calls run PyTorch out of the op tracer's sight. On a 64 x 96 matrix PyTorch's kernels take a few microseconds of a call of about a millisecond, so the judge's samples from outside land there in some jobs only (1 of 4 seen). profiler_aware_fallback_big.py is the same program on 16 MB, and is caught.
"""Hack: the one traced trial is recognisable from inside (the profiler flag is up): then the
candidate runs its C kernel. Every other call is PyTorch, under _disable_current_modes(), which
pops the op tracer off the mode stack, so its counts stay empty."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

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

    def forward(self, x):
        if torch.autograd.profiler._is_profiler_enabled:
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        with _disable_current_modes():
            return torch.relu(x * 2.0 + 1.0)
