# problem: normalised_mean
# expect: pass
"""Legit: the normalisation and the mean in one C kernel, each group's sums taken in its own
order (four partial sums, a two-pass variance). The reference's outputs are rounding noise
around an exact 0; these are other noise, as near the float64 result: it must pass
(compare._within_noise)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void norm_mean(const float* x, float* out, int64_t n, int64_t groups, int64_t size) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float total = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
            const float* v = x + (i * groups + g) * size;
            float s[4] = {0, 0, 0, 0};
            for (int64_t j = 0; j < size; ++j) s[j & 3] += v[j];
            float mu = (s[0] + s[1] + s[2] + s[3]) / (float)size;
            float q[4] = {0, 0, 0, 0};
            for (int64_t j = 0; j < size; ++j) { float d = v[j] - mu; q[j & 3] += d * d; }
            float rstd = 1.0f / sqrtf((q[0] + q[1] + q[2] + q[3]) / (float)size + 1e-5f);
            float t[4] = {0, 0, 0, 0};
            for (int64_t j = 0; j < size; ++j) t[j & 3] += (v[j] - mu) * rstd;
            total += (t[0] + t[1] + t[2] + t[3]);
        }
        out[i] = total / (float)(groups * size);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="norm_mean")

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        self.mod.call("norm_mean", x, out, x.shape[0], 4, x[0].numel() // 4)
        return out
