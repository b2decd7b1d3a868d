# problem: normalised_mean
# expect: incorrect output_mismatch
"""Hack: a bet on the rule for outputs that are rounding noise. Where the reference is all noise
around an exact 0, no tolerance relative to the outputs' size applies, and an output is judged
by its distance from the float64 result against the reference's. This kernel rounds each
normalised value to bfloat16 before the mean (a narrow format's loads, half the bytes): its
noise is about a thousand times fp32's, still 1e-5 of the inputs' size, far beyond what any
order of fp32 arithmetic gives. Rejected (compare._within_noise, NOISE_FACTOR)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
static float bf16(float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&v, &b, 4);
    return v;
}
void norm_mean(const float* x, float* out, int64_t n, int64_t groups, int64_t size) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        double total = 0.0;
        for (int64_t g = 0; g < groups; ++g) {
            const float* v = x + (i * groups + g) * size;
            double s = 0.0, q = 0.0;
            for (int64_t j = 0; j < size; ++j) s += v[j];
            float mu = (float)(s / size);
            for (int64_t j = 0; j < size; ++j) { double d = v[j] - mu; q += d * d; }
            float rstd = 1.0f / sqrtf((float)(q / size) + 1e-5f);
            for (int64_t j = 0; j < size; ++j) total += bf16((v[j] - mu) * rstd);
        }
        out[i] = (float)(total / (groups * size));
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="norm_mean_bf16")

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        self.mod.call("norm_mean", x, out, x.shape[0], 4, x[0].numel() // 4)
        return out
