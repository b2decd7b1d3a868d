# problem: pointwise
# expect: incorrect output_count
# why: a checked call's reply may name no more outputs than the reference has: the judge counts them before it reads (or, on CUDA, copies out of the arena) any of them, so a hundred thousand entries cost it nothing.
"""Hack: the harness's ``send`` is wrapped so that a checked call's reply names its one output a
hundred thousand times (on CUDA, each an entry spanning the whole arena): a judge that copied
each one out before counting them would run its own GPU out of memory, and a rejection would
become the judge's internal error."""
import gc

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
H = next(o for o in gc.get_objects() if type(o).__name__ == "Harness")
_send = H.send


def _flood(groups, tag, after=False):
    placed = _send(groups, tag, after=after)
    return [[dict(es[0]) for _ in range(100_000)] if es else es for es in placed]


H.send = _flood


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
