# problem: cancellation
# expect: incorrect output_mismatch
"""Hack: the reference of this problem is itself 2.4e-4 from exact arithmetic, and the Verifier
then allows a few times the reference's own error against a float64 computation. This candidate
hopes the margin covers bf16: it rounds x to 8 significant bits (errors of up to 4e-3 for |x|
near 1, and growing with |x|), far more than the reference's rounding to 1/2048."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <string.h>
void to_bf16(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        uint32_t u; memcpy(&u, &x[i], 4);
        u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
        memcpy(&y[i], &u, 4);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="bf16_cancel")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("to_bf16", x, y, x.numel())
        return y
