# problem: decayed_states
# expect: pass
"""Legit: the scan in a C kernel that sums each row in blocks of 8, then adds the blocks'
offsets (the order a parallel scan takes), and scales the input projection by the decays; the
chunk sum is a batched GEMM in the library. Hundreds of outputs are apart from the reference,
each as close to float64 as the reference is. On most draws the reference's errors have a tail
(a few misses of the float64 result far above its typical error), and this order misses on
about as many elements, others: it must pass (compare.TAIL_MISSES)."""
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
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="scan_in_blocks")

    def forward(self, a, b, x):
        a = a.contiguous()
        scan = torch.empty_like(a)
        self.mod.call("scan8", a, scan, a.shape[0], a.shape[1])
        bd = torch.empty_like(b)
        self.mod.call("decay_b", scan, b.contiguous(), bd, a.shape[0], a.shape[1], b.shape[2])
        return torch.einsum("bln,blp->bpn", bd, x)    # a batched GEMM, in the library
