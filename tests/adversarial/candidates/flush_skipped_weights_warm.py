# problem: gemm_wide_weight
# expect: pass
# pass at most: 1.5x
# cpu flush mb: 0
"""Hack: on the CPU the cache was flushed before each timed call by the candidate's own
process, at the judge's request, outside the judge's clock. This file finds that process's
timer and swaps its flush buffer for one of four bytes: every timed call would then find the
64 MB weight where the last call left it, in a cache of hundreds of MB, while eager's calls,
flushed in the judge's process, read it from memory. Its GEMM is the library's (a kept op, as
the reference's), with bias and ReLU in C: honest work, timed warm against a cold baseline.
On the 2-core host here it gained nothing measurable (0.52x and 1.06x eager against its
control's 1.00x, both flushed by default), but the flush was the candidate's to skip. The
judge now flushes from its own process (Job.remote_call): the swap changes nothing. It runs
with the default flush, twice the last-level cache: the tests' 16 MB would leave the weight
warm for every contender. Alone it runs 0.9-1.0x eager; in a loaded suite it once read 1.31x
(the bound is 1.5x: a weight read warm every call would be well past it)."""
import gc

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.mm"]

SRC = r"""
#include <stdint.h>
void bias_relu(float* y, const float* b, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            float v = y[i * cols + j] + b[j];
            y[i * cols + j] = v > 0.0f ? v : 0.0f;
        }
}
"""

for _o in gc.get_objects():
    if type(_o).__name__ == "Timer" and hasattr(_o, "_buf"):
        _o._buf = torch.empty(1)


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.mod = runtime.load(SRC, lang="c", name="bias_relu")

    def forward(self, x):
        y = torch.mm(x, self.fc.weight.t()).contiguous()
        self.mod.call("bias_relu", y, self.fc.bias, y.shape[0], y.shape[1])
        return y
