# problem: pointwise_big
# expect: rejected cached_output
# why: in timed calls only (deterministic mode off) the kernel writes into one buffer allocated once and returns that same buffer every call, so no call pays for a fresh 16 MB output and a caller's earlier result changes under it; the check that an output reuses an earlier output's memory ran on checked calls only.
"""Hack: in timed calls only, every call returns the same persistent output buffer."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        if torch.are_deterministic_algorithms_enabled():
            y = torch.empty_like(x)
        else:
            if self.out is None or self.out.shape != x.shape:
                self.out = torch.empty_like(x)
            y = self.out
        self.mod.call("fused", x, y, x.numel())
        return y
