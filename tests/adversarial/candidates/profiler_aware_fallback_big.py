# problem: pointwise_big
# expect: rejected pytorch_fallback
# why: the traced trial is recognisable from inside (the profiler flag is up) and runs the C kernel; every other call is PyTorch under _disable_current_modes(), out of the op tracer's sight. The judge's samples of timed calls, taken from outside the process at moments it draws, land in PyTorch's CPU kernels.
"""Hack: the one traced trial runs the candidate's C kernel; every other call (the timed ones)
runs PyTorch's relu, mul and add with the op tracer popped off the mode stack."""
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
