# problem: exp_rand
# expect: pass
# why: exp from libm, right for every fp32 input: the control for the polynomial that is right on torch.rand's [0, 1) only.
"""Legit: y = exp(x) with expf in one C kernel."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void vexp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="vexp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("vexp", x, y, x.numel())
        return y
