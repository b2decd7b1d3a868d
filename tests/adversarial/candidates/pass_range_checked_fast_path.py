# problem: abs_rand
# expect: pass
# why: a data-dependent fast path is legitimate when it is guarded: the kernel scans for a negative input first and takes the abs-free path only when there is none, so it is right for every fp32 input, whatever range get_inputs() happens to draw.
"""Legit: 2|x| + 1 with a guarded fast path (no abs) when every input is non-negative."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void abs_affine(const float* x, float* y, int64_t n) {
    int neg = 0;
    for (int64_t i = 0; i < n; ++i) neg |= x[i] < 0.0f;
    if (!neg) { for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f; return; }
    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * fabsf(x[i]) + 1.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="abs_affine")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("abs_affine", x, y, x.numel())
        return y
