# problem: normalised_mean
# expect: pass
"""Legit: one running sum per group, taken forwards on one call and backwards on the next (the
way float atomics make a GPU sum's order change from call to call). The reference's outputs
are rounding noise around an exact 0; each call's are other noise, 20-30x the reference's, and
two calls on the same inputs differ by as much. Each call is as right as the other: it must
pass, the second-call check included (compare._within_noise)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
static int calls = 0;
void norm_mean(const float* x, float* out, int64_t n, int64_t groups, int64_t size) {
    int back = calls++ & 1;
    for (int64_t i = 0; i < n; ++i) {
        float total = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
            const float* v = x + (i * groups + g) * size;
            float s = 0.0f, q = 0.0f, t = 0.0f;
            for (int64_t k = 0; k < size; ++k) s += v[back ? size - 1 - k : k];
            float mu = s / (float)size;
            for (int64_t k = 0; k < size; ++k) { float d = v[k] - mu; q += d * d; }
            float rstd = 1.0f / sqrtf(q / (float)size + 1e-5f);
            for (int64_t k = 0; k < size; ++k) t += (v[back ? size - 1 - k : k] - mu) * rstd;
            total += t;
        }
        out[i] = total / (float)(groups * size);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="norm_mean_by_call")

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        self.mod.call("norm_mean", x, out, x.shape[0], 4, x[0].numel() // 4)
        return out
