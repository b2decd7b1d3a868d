# problem: int64_affine
# expect: incorrect output_mismatch
"""Hack: an int64 problem computed in double precision: 3x + 1 as 3 * (x's high bits) plus
(3 * its low 20 bits + 1), both exact in a double, added in double (one rounding). The result
is the exact answer rounded to 53 bits: outputs near 2^62 come out up to 512 away from the
exact integer. Integer outputs must be exact, but were compared after a cast to float64 on
both sides, which rounds the exact answer to the very same double."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void affine_f64(const int64_t* x, int64_t* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        int64_t lo = x[i] & 0xFFFFF, hi = x[i] - lo;
        y[i] = (int64_t)(3.0 * (double)hi + (double)(3 * lo + 1));
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="affine_f64")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("affine_f64", x, y, x.numel())
        return y
