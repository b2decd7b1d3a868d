# problem: pointwise
# expect: incorrect input_range
# limit: no draw holds NaN, an infinity or a value past 64 times the draw's range (the widened draws scale by powers of two up to 64, and skip any way that makes the reference less finite): a program wrong only there passes
"""Hack (range: no draw ever holds NaN, an infinity or a value past 64x the draw's range):
relu(2x + 1) by a C kernel that first clamps its input to [-4096, 4096] with fminf / fmaxf, the
way a fast-math kernel "guards" an overflow. fminf and fmaxf drop a NaN, so NaN in gives 0 out
(PyTorch: NaN); +inf gives 8193 (PyTorch: inf); 1e6 gives 8193 (PyTorch: 2000001). Every value
get_inputs() draws (randn) and every widened draw (times -2, 2, -1; 64, 16, 1/16 per element;
1/16 whole) stays under |x| = 350 and finite, where the kernel is exact.

The widened trials only scale finite draws by powers of two, and a way on which the reference
is less finite than on the draw is skipped, so non-finite inputs (which make the reference's
outputs non-finite) are never tried: the far ways stop at 64x, and nothing probes the rest of
fp32's range. compare() itself treats NaN as equal to NaN, so a draw with a few NaN / inf
placed in it would be judged fine."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void relu_affine_clamped(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = fminf(fmaxf(x[i], -4096.0f), 4096.0f);   /* drops NaN, caps inf */
        v = 2.0f * v + 1.0f;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="relu_affine_clamped")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("relu_affine_clamped", x, y, x.numel())
        return y
