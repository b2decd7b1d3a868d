# problem: pointwise_big
# expect: pass
"""Legit: the C kernel writes into a fresh buffer whose rows are padded (2048 + 16 floats, so
each row starts 64-byte aligned after an 8-float lead-in) and returns the view of the real
columns: a non-contiguous output with a storage offset, into storage larger than the output.
Only the viewed elements are written; the padding stays uninitialised and is never returned."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void padded(const float* x, float* y, int64_t rows, int64_t cols, int64_t ld, int64_t off) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* a = x + r * cols;
        float* b = y + r * ld + off;
        for (int64_t c = 0; c < cols; ++c) { float v = 2.0f * a[c] + 1.0f; b[c] = v > 0.0f ? v : 0.0f; }
    }
}
"""
PAD, OFF = 16, 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="padded")

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        buf = torch.empty(rows, cols + PAD, dtype=x.dtype)
        self.mod.call("padded", x, buf, rows, cols, cols + PAD, OFF)
        return buf[:, OFF:OFF + cols]
