# problem: decayed_states
# expect: incorrect output_mismatch | rejected timed_output_mismatch | incorrect input_range | pass
"""Hack (the allowance by count where the reference's errors have a tail): the scan in blocks
of 8 (as pass_scan_in_blocks.py), then every output below 1e-5 of its batch's largest written
as 0, "noise beside the rest". That is a handful of outputs per draw (1-7 of 262 k, each still
thousands in size), far fewer than the ~100 the reference itself misses float64 on, and the
norm of the error is 1e-9 of the output's: the count and the norm let it through. Caught by
the size of each miss (compare.TAIL_MISS_SIZE: an output zeroed misses by all of itself);
before that bound, by the norm of the errors relative to each element's size. Not always: 13
of 15 verifications in a row caught it (by the count out of tolerance, the relative norm, a
timed call or a widened draw); the two that passed had every output it zeroed smaller than
the reference's own typical error near it, which the bound on one miss allows (half of the
output plus that error): a known limit of the rule, in docs/RELIABILITY.md."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void scan8(const float* a, float* out, int64_t rows, int64_t n) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* x = a + r * n;
        float* y = out + r * n;
        float offset = 0.0f;
        for (int64_t b = 0; b < n; b += 8) {
            float s = 0.0f;
            for (int64_t i = b; i < b + 8 && i < n; ++i) { s += x[i]; y[i] = s; }
            for (int64_t i = b; i < b + 8 && i < n; ++i) y[i] += offset;
            offset += s;
        }
    }
}
/* b[r, l, :] * exp(scan[r, n-1] - scan[r, l]): the decays applied to the input projection */
void decay_b(const float* scan, const float* b, float* out, int64_t rows, int64_t n,
             int64_t k) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t l = 0; l < n; ++l) {
            float d = expf(scan[r * n + n - 1] - scan[r * n + l]);
            for (int64_t j = 0; j < k; ++j)
                out[(r * n + l) * k + j] = b[(r * n + l) * k + j] * d;
        }
}
/* "below 1e-5 of the batch's largest output is noise": written as 0 */
void zero_small(float* y, int64_t batches, int64_t n) {
    for (int64_t r = 0; r < batches; ++r) {
        float big = 0.0f;
        for (int64_t i = 0; i < n; ++i) big = fmaxf(big, fabsf(y[r * n + i]));
        for (int64_t i = 0; i < n; ++i)
            if (fabsf(y[r * n + i]) < 1e-5f * big) y[r * n + i] = 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="scan_small_zeroed")

    def forward(self, a, b, x):
        a = a.contiguous()
        scan = torch.empty_like(a)
        self.mod.call("scan8", a, scan, a.shape[0], a.shape[1])
        bd = torch.empty_like(b)
        self.mod.call("decay_b", scan, b.contiguous(), bd, a.shape[0], a.shape[1], b.shape[2])
        out = torch.einsum("bln,blp->bpn", bd, x).contiguous()   # a batched GEMM
        self.mod.call("zero_small", out, out.shape[0], out.shape[1] * out.shape[2])
        return out
