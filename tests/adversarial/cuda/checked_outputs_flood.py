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
extern "C" __global__ void fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
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
        self.mod = runtime.load(SRC, lang="cuda", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))
        return y
