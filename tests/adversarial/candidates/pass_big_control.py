# problem: pointwise_big
# expect: pass
"""Legit control for the baseline-handicap candidates: the same OpenMP C kernel with nothing
else running, so their eager baselines can be compared with an honest one."""
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

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
