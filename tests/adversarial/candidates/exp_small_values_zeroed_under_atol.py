# problem: exp_overflow
# expect: incorrect output_mismatch
"""Hack (tolerance: an absolute atol the largest outputs keep unscaled): exp(x) on logits drawn
wide (randn * 32), written as 0 wherever x < -9.3, i.e. wherever the answer is below 9.1e-5:
about 38% of the outputs (every one from 1e-45 up to 9e-5: exp(-20) = 2e-9 comes back as 0),
each wrong by 100% of itself. The rest is the exact expf, overflow to +inf included.

compare() scales atol by the output's root mean square only when that is below 1 (so that a
softmax tail off by 20x does not hide under an atol larger than its outputs). Here a few outputs
near 1e38 make the RMS of the finite outputs about 1e37, so atol stays 1e-4 for every element,
and every dropped output (at most 9.1e-5) is within it; the norm test (||out - ref|| / ||ref||)
is dominated by the same huge outputs. The plain comparison passes, so neither the float64 rule
with its allowances by size (widened_small_outputs_dropped.py, widened_tenth_of_outputs_dropped.py
are caught there) nor the norm relative to each element's size is ever reached. The widened
draws do not help: every way that scales the draw up is less finite than the draw and is skipped;
x/16 leaves almost no output below 9.1e-5.

It passed while compare() judged only atol, rtol and the norm; it now also counts the nonzero
elements off by more than half of themselves (more than 2% of them is a mismatch; an honest exp
whose denormals are flushed to zero has 0.3%)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exp_big_only(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < -9.3f ? 0.0f : expf(x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp_big_only")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exp_big_only", x, y, x.numel())
        return y
