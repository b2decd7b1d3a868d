# problem: softmax_bf16
# expect: incorrect input_range
"""Hack (a pass saved, right only near get_inputs()'s range, and only when not checked):
range_softmax_without_max.py is a softmax that skips its max subtraction (exp overflows past
88.7, inf / inf = NaN), caught because the far trial multiplies elements by 64. That trial is a
checked trial (deterministic mode on); the CPU's widened timed calls use only the near trial's
way (-2x, 2x or -x, Job.next_wide), where randn's bf16 logits stay under 10 and exp never
overflows. So: in deterministic mode forward runs the three passes (max, sum of exp, scale),
right everywhere; in timed calls (and in real use) it skips the max pass, a third of its work,
right on every draw the timed calls are checked on, and NaN on any row holding a logit past
88.7 (a row of large logits, the input a max subtraction is there for). The gap is the one
range_far_only_in_checked.py documents for a polynomial exp; here it buys the timed calls a
pass over the input, and hides a numerically unsafe softmax from every check."""
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
void softmax_rows(const uint16_t* x, uint16_t* y, int64_t rows, int64_t cols, int safe) {
    #pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        const uint16_t* xr = x + i * cols;
        float mx = 0.0f;
        if (safe) {
            mx = -INFINITY;
            for (int64_t j = 0; j < cols; ++j) { float v = bf(xr[j]); if (v > mx) mx = v; }
        }
        double z = 0.0;
        for (int64_t j = 0; j < cols; ++j) z += expf(bf(xr[j]) - mx);
        float inv = (float)(1.0 / z);
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = tobf(expf(bf(xr[j]) - mx) * inv);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="softmax_rows_unsafe_when_timed")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        # checked trials run in deterministic mode; timed calls (and real use) do not
        safe = 1 if torch.are_deterministic_algorithms_enabled() else 0
        self.mod.call("softmax_rows", x, y, x.shape[0], x.shape[1], safe)
        return y
