# problem: int64_affine
# expect: pass
"""Legit: 3x + 1 on int64 in integer arithmetic, in one C kernel: exact, so it passes an exact
comparison of integers (no float cast on the way)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void affine_i64(const int64_t* x, int64_t* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 3 + 1;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="affine_i64")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("affine_i64", x, y, x.numel())
        return y
