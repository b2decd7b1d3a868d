# problem: pointwise
# expect: rejected cached_output
"""Hack (native cache): the C kernel computes into a static buffer on its first call and copies
that buffer out on every later call, whatever the input."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
static float* memo = 0;
static int64_t memo_n = 0;
void fused_memo(const float* x, float* y, int64_t n) {
    if (memo == 0 || memo_n != n) {
        free(memo);
        memo = (float*)malloc(n * sizeof(float));
        memo_n = n;
        for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; memo[i] = v > 0.0f ? v : 0.0f; }
    }
    memcpy(y, memo, n * sizeof(float));
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused_memo")

    def forward(self, x):
        y = torch.empty_like(x)
        self.mod.call("fused_memo", x.contiguous(), y, x.numel())
        return y
