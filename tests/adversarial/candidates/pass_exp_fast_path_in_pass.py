# problem: exp_rand
# expect: pass
"""Legit: exp(x) by a short polynomial where 0 <= x < 1 (the draw's range: degree 9, about
1e-9 off there) and by libm's expf elsewhere, decided per element inside the one pass (no
separate scan of the input). Right on every input; fast on get_inputs()'s."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <math.h>
void fexp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (v >= 0.0f && v < 1.0f) {
            float acc = 1.0f;
            for (int k = 9; k >= 1; --k) acc = 1.0f + acc * v / (float)k;
            y[i] = acc;
        } else {
            y[i] = expf(v);
        }
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fexp")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fexp", x, y, x.numel())
        return y
