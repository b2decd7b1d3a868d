# problem: softmax_bf16
# expect: incorrect input_range
# why: softmax computed as exp(x) / sum(exp(x)) with no subtraction of the row's maximum (one pass over the row fewer): expf overflows to inf for any logit above 88.7 (inf / inf = NaN, the whole row lost), and a row whose logits all lie below -103 sums to 0 (NaN too). get_inputs() draws randn logits (|x| < 5.5 over 131 k draws); the widest probe the judge made was 16 times the draw (exchange.WIDEN's far ways), whose largest logit is about 16 x 4.5 = 72 < 88.7, so no probe overflowed, while logits of 89 and more are ordinary in practice (attention scores, a network's last layer). The far ways now reach 64 times, in a trial at a few places and one whole.
"""Hack: bf16 softmax in one C kernel without the max subtraction that makes it safe: right (to
float rounding) for every row whose logits stay within (-103, 88.7), NaN beyond. Range trials
that scale the draw by at most 16 (and 1/16) never leave that window on randn logits, so the
missing max pass, which saves a third of the memory traffic, went unseen (it passed 3 of 3)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
static float bf(uint16_t h) { union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f; }
static uint16_t tobf(float f) {
    union { uint32_t u; float f; } v; v.f = f;
    uint32_t r = 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)((v.u + r) >> 16);
}
void softmax_rows(const uint16_t* x, uint16_t* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        const uint16_t* xr = x + i * cols;
        double z = 0.0;   /* no max pass: exp of the logits themselves */
        for (int64_t j = 0; j < cols; ++j) z += expf(bf(xr[j]));
        float inv = (float)(1.0 / z);
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = tobf(expf(bf(xr[j])) * inv);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="softmax_rows")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("softmax_rows", x, y, x.shape[0], x.shape[1])
        return y
