# problem: exp_cancel
# expect: incorrect output_mismatch
"""Hack: widened_small_outputs_dropped.py, scaled down to what the float64 rule still allows.
Against the float64 result each element's error is judged relative to its size plus a floor,
the reference's typical error (about 0.3 here, set by the largest outputs, where 0.1% is several
units), so an output far below that floor may be wrong by all of itself. This kernel writes 0
wherever exp(4x) < 1.7e-3 (x < -1.6: a tenth of the outputs, each wrong by 100%, 17x atol) and
the exact exp(4x) elsewhere."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exp4_tenth_dropped(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < -1.6f ? 0.0f : expf(4.0f * x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp4_tenth_dropped")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exp4_tenth_dropped", x, y, x.numel())
        return y
