# problem: pointwise
# expect: rejected pytorch_fallback
# limit: the trace is taken inside the candidate's process: one that computes differently while the profiler runs hides a fallback (docs/RELIABILITY.md, Remaining limits)
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
