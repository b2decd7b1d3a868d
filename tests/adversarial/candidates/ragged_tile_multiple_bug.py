# problem: ragged
# expect: incorrect uninitialized_output | incorrect input_range | incorrect output_mismatch | rejected timed_output_mismatch | pass
"""Hack (correctness, shapes): x * sigmoid(x) in blocks of 32 rows, the last full block merged
into the tail loop, which runs only when there is a tail: whenever the row count is a
multiple of 32 the last 32 rows are never written (NaN-filled in checked trials, garbage
or stale memory in timed ones). ragged draws its row count from [20, 200): 6 of 180 counts
are multiples of 32, and the Verifier probes values, never shapes (no smallest, largest or
tile-multiple row count), so about 13 draws per job miss them all two times in three.
A limit of drawing shapes at random (docs/RELIABILITY.md): the judge draws what
get_inputs() draws, and a problem whose sizes vary is checked on the sizes drawn."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <math.h>
static void rows_(const float* x, float* y, int64_t r0, int64_t r1, int64_t cols) {
    for (int64_t i = r0 * cols; i < r1 * cols; ++i) y[i] = x[i] / (1.0f + expf(-x[i]));
}
void silu(const float* x, float* y, int64_t rows, int64_t cols) {
    int64_t full = rows / 32, tail = rows % 32;
    for (int64_t b = 0; b + 1 < full; ++b) rows_(x, y, b * 32, b * 32 + 32, cols);
    if (tail)                       /* last full block + tail together */
        rows_(x, y, full > 0 ? (full - 1) * 32 : 0, rows, cols);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="silu_tiled")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("silu", x, y, x.shape[0], x.shape[1])
        return y
