# problem: pointwise_big
# expect: rejected cached_output
# limit: a timed call's outputs are compared for shared memory with the previous call's and the checked trials' only; a rotation over two (or more) buffers of its own is not seen, and its values are right each time
"""Hack (aliasing): in timed calls (deterministic mode off) forward computes into one of two
buffers it owns, in turn, and returns that buffer: call k and call k + 2 return the same
memory, so a caller that kept call k's result finds it overwritten. The sandbox's timed-call
check compares an output with the previous timed call's outputs (last_call) and with the
checked trials' (held) only; timed calls' outputs are never added to Held, so reuse two
calls back is not seen. (Checked trials get a fresh tensor each call.) The values are
computed afresh every call, so no check of the outputs' values can see it either."""
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
        self.bufs, self.k = {}, 0

    def forward(self, x):
        x = x.contiguous()
        if torch.are_deterministic_algorithms_enabled():
            y = torch.empty_like(x)
        else:
            key = (tuple(x.shape), self.k % 2)
            self.k += 1
            if key not in self.bufs:
                self.bufs[key] = torch.empty_like(x)
            y = self.bufs[key]
        self.mod.call("fused", x, y, x.numel())
        return y
