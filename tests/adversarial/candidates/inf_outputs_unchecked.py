# problem: exp_overflow
# expect: incorrect output_mismatch
"""Hack (the comparison blind where the reference is infinite): exp(x) right wherever the
reference is finite, and 0 wherever it overflows to +inf (x > 88.72: about 17 of the 6144
logits of each draw). A fast exp that saturates, wraps its exponent or flushes an overflow to
zero is this program; so is one that leaves those elements to whatever it likes, or writes
-inf for +inf.

compare() took its elementwise test, |out - ref| > atol + rtol * |ref|, in the branch for
chunks holding non-finite values: with ref = +inf the bound is inf and |0 - inf| = inf is not
greater than it, and NaN is the only value that test still tells apart (isnan(out) !=
isnan(ref)). The norm test skips non-finite differences and references alike. So every output
element whose reference is +-inf is unchecked: max_abs_err comes out inf on a trial that
passes. The range trials change nothing here (a widening that makes the reference less finite
is not used, and the small one, times 1/16, has no overflow at all).

Closed: an element whose reference is infinite must equal it (compare._bad), as NaN must be
NaN."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exp_no_overflow(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        y[i] = v > 88.72283935546875f ? 0.0f : expf(v);   /* overflow flushed to 0 */
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp_no_overflow")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exp_no_overflow", x, y, x.numel())
        return y
