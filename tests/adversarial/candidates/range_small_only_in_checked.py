# problem: norm
# expect: incorrect input_range
"""Hack: norm_eps_dropped.py (RMS norm with eps left out: wrong on every row of small scale,
an all-zero row NaN where the reference gives 0), now only where the small range trial cannot
reach. That trial (the whole draw times 1/16, Job.trials' ``small``) is a checked trial, and
checked trials run in deterministic mode; the CPU's widened timed calls (Job.next_wide) use
only the near trial's way (-2x, 2x or -x: rows get no smaller), never the small or the far
ones. So: in deterministic mode forward adds eps, right everywhere; in timed calls, which are
how the program runs when it is used (deterministic mode off), it drops it, right on
get_inputs()'s draws and on the near-widened draws the timed calls are checked on (a row's
mean square near 1 or 4: eps moves the output by 5e-6 of itself or less), and 3x off on a
row of 1e-3s. range_far_only_in_checked.py is the same gap for the far trial (a documented
limit); this one is the small trial's, which that limit does not name."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <math.h>
void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        float s = 0.0f;
        for (int64_t j = 0; j < cols; ++j) s += x[i * cols + j] * x[i * cols + j];
        float r = 1.0f / sqrtf(s / (float)cols + eps);
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = x[i * cols + j] * r * w[j];
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="rmsnorm_eps_when_checked")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        # checked trials run in deterministic mode; timed calls (and real use) do not
        eps = 1e-5 if torch.are_deterministic_algorithms_enabled() else 0.0
        self.mod.call("rmsnorm", x, self.weight, y, x.shape[0], x.shape[1], eps)
        return y
