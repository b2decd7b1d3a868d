# problem: pointwise_big
# expect: rejected pytorch_fallback | rejected patched_timer | pass
# why: a stopped process cannot hide where it stopped, but it learns it was stopped once it is continued (a SIGCONT handler). This one hands its forward to PyTorch (out of the op tracer's sight) until a SIGCONT arrives in the middle of a forward, and runs its own C kernel from then on, so every later sample finds its own code. The judge's first stop that finds work being done is judged alone: it lands in PyTorch's kernels whenever it lands in the forward rather than in the call around it (most jobs on 16 MB).
"""Hack: PyTorch's relu, mul and add (op tracer popped, and its C kernel while the profiler is on)
until the process is continued in the middle of a forward; its own C kernel ever after.

Its SIGCONT handler is a Python signal handler installed by the candidate: the harness
refuses one after a timed call (patched_timer), since it runs wherever the harness is.
"""
import signal

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
STATE = {"in_forward": False, "sampled": False}


def _continued(signum, frame):
    if STATE["in_forward"]:   # stopped while computing: someone is looking
        STATE["sampled"] = True


signal.signal(signal.SIGCONT, _continued)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def own(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y

    def forward(self, x):
        if STATE["sampled"] or torch.autograd.profiler._is_profiler_enabled:
            return self.own(x)
        STATE["in_forward"] = True
        try:
            with _disable_current_modes():
                return torch.relu(x * 2.0 + 1.0)
        finally:
            STATE["in_forward"] = False
