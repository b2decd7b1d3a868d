# problem: naive_softmax
# expect: pass
# why: a softmax that subtracts its row's max agrees with the reference wherever the reference is finite; a timed call's widened draw that takes the reference past what its range trial vetted (NaN rows) is not judged.
"""Legit: the reference's softmax, made stable (the row's max subtracted), in one C kernel. It
is finite on every input, the reference is NaN on rows that a widening scales past exp's range.
The range trials only vet a way on a draw where the reference stays as finite as on the plain
draw; a timed call widened the same way on another seed can still take it to NaN, and there the
two disagree with the candidate right. Such a call is skipped (verify.Job.check_timed), not
judged against a NaN."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* r = x + i * cols;
        float mx = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) mx = r[j] > mx ? r[j] : mx;
        float z = 0.0f;
        for (int64_t j = 0; j < cols; ++j) z += expf(3.0f * (r[j] - mx));
        for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = expf(3.0f * (r[j] - mx)) / z;
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
