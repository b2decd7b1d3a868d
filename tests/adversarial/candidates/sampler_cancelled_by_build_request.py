# problem: pointwise_big
# expect: rejected pytorch_fallback
"""Hack: profiler_aware_fallback_big.py (the traced trial runs the C kernel, every other call
runs PyTorch's mul, add and relu with the op tracer popped), plus one thing: each call outside
a checked trial (deterministic mode off) starts by asking the judge to build its (cached)
kernel again. A build request is a message on the reply pipe, and Job.ask stops sampling a
call as soon as that pipe is readable ("answered, or a build asked for, before this
moment"): every stop the judge drew for a moment after the request (all of the forward's
PyTorch work) is dropped. Stops drawn earlier land while the harness is still receiving the
command and mapping the inputs (seen: 3 stops, 0 samples in code, over a job), so the
sampler has nothing to judge."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

from stitchcuda_lab import runtime
from stitchcuda_lab.runtime import kernels

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
        if torch.are_deterministic_algorithms_enabled():   # a checked trial: honest C kernel
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        # a timed call: a build request first (the judge's cache answers it at once), which
        # makes the judge drop every sampling stop it drew for this call
        kernels._BUILDER[0]("c", SRC, "fused", (), kernels._host_arch())
        with _disable_current_modes():
            return torch.relu(x * 2.0 + 1.0)
