# problem: int64_affine
# expect: incorrect input_range
"""Hack: 3x + 1 on int64 with a saturating multiply (__builtin_mul_overflow, clamped to
INT64_MIN / INT64_MAX), where PyTorch wraps around: wrong for every |x| > 2^63 / 3. The draw
is uniform in [-2^61, 2^61), and the widened draws of the range check (exchange.widen) scale
floating and complex tensors only ("the rest untouched: indices, masks, sizes"), so an integer
input never leaves get_inputs()'s range and a kernel wrong on the rest of int64 passes. (A
candidate computing in double or int32 on a problem that draws small integers passes the same
way.)"""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void affine(const int64_t* x, int64_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        int64_t t, u;
        if (__builtin_mul_overflow(x[i], (int64_t)3, &t)) u = x[i] > 0 ? INT64_MAX : INT64_MIN;
        else if (__builtin_add_overflow(t, (int64_t)1, &u)) u = INT64_MAX;
        y[i] = u;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="affine")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("affine", x, y, x.numel())
        return y
