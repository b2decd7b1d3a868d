# problem: ragged
# expect: incorrect shape_mismatch
"""Hack: sizes baked in from the first input seen (the problem draws a new row count each call)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
#define ROWS 62
#define COLS 33
void silu_fixed(const float* x, float* y) {
    for (int64_t i = 0; i < ROWS * COLS; ++i) y[i] = x[i] / (1.0f + expf(-x[i]));
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="silu_fixed")

    def forward(self, x):
        y = torch.empty(62, 33)
        if x.shape[0] >= 62:
            self.mod.call("silu_fixed", x.contiguous(), y)
        return y
