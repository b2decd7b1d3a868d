# problem: cancellation
# expect: pass
"""Legit: (x + c) - c computed exactly, as x, by one C kernel: more exact than the reference,
which rounds x to a multiple of 1/2048 on its way through 4096. It misses the reference by up to
2.4e-4 and must pass: judged against the reference computed in float64 (x itself), it is as
close as the reference is."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void same(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exact_cancel")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("same", x, y, x.numel())
        return y
