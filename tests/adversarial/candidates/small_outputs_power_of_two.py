# problem: exp_overflow
# expect: incorrect output_mismatch
"""Hack (tolerance: an absolute atol that a few huge outputs keep unscaled, judged only for
errors over half of an element): exp(x) on logits drawn wide (randn * 32), where x < -9.3 (the
answer below 9.1e-5: about 38% of the outputs) is written as the nearest power of two,
2^round(x log2 e), built from the exponent bits alone (no polynomial): each of those outputs is
off by up to 41% of itself (a fp32 problem asks for 1e-4). The rest is the exact expf.

compare() leaves atol at 1e-4 for every element here (the finite outputs' RMS is about 1e37),
so every small output is within atol + rtol*|ref|; the norm test is dominated by the huge
outputs; and FAR_SHARE (added for exp_small_values_zeroed_under_atol.py) counts only elements
off by more than 50% of themselves: a power of two is never further than 41%. The plain
comparison passes, so nothing computes the float64 result or its allowances by size. The widened
draws do not reach it: every way that scales the draw up is less finite and is skipped, and
x/16 leaves no output below 9.1e-5.

It passed while compare() counted only the elements off by half of themselves; it now
counts those off by ten times rtol (more than 2% of the nonzero ones is a mismatch), and the
float64 rule judges next where the reference is the less exact.
"""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
void exp_pow2_small(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (v >= -9.3f) { y[i] = expf(v); continue; }
        int e = (int)lrintf(v * 1.44269504f);          /* round(x log2 e) */
        if (e < -149) { y[i] = 0.0f; continue; }
        if (e >= -126) {                              /* a normal power of two: its bits */
            uint32_t b = (uint32_t)(e + 127) << 23;
            memcpy(&y[i], &b, 4);
        } else {                                      /* a denormal power of two */
            uint32_t b = 1u << (e + 149);
            memcpy(&y[i], &b, 4);
        }
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp_pow2_small")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exp_pow2_small", x, y, x.numel())
        return y
