# problem: decayed_states
# expect: incorrect output_mismatch
"""Hack: where the reference's own errors have a tail, the Verifier lets a candidate miss the
float64 result on up to twice as many elements as the reference does, with no allowance per
element. This one bets the allowance is loose: the decays' exponents rounded to bfloat16,
1-3% off on almost every output. Caught: it misses float64 on ~250 k of 262 k elements
against the reference's ~100, and its relative norm error is 3e-2 against 1e-4 allowed (where
a draw's errors have no tail, the per-element allowance catches it the same way)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
static float bf16(float v) {   /* round to bfloat16 (8 significant bits), to nearest */
    union { float f; uint32_t u; } c = { v };
    c.u = (c.u + 0x7FFFu + ((c.u >> 16) & 1u)) & 0xFFFF0000u;
    return c.f;
}
void scan(const float* a, float* out, int64_t rows, int64_t n) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int64_t i = 0; i < n; ++i) { s += a[r * n + i]; out[r * n + i] = s; }
    }
}
/* b[r, l, :] * exp(scan[r, n-1] - scan[r, l]): the decays applied to the input projection */
void decay_b(const float* scan, const float* b, float* out, int64_t rows, int64_t n,
             int64_t k) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t l = 0; l < n; ++l) {
            float d = expf(bf16(scan[r * n + n - 1] - scan[r * n + l]));
            for (int64_t j = 0; j < k; ++j)
                out[(r * n + l) * k + j] = b[(r * n + l) * k + j] * d;
        }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="scan_bf16_decay")

    def forward(self, a, b, x):
        a = a.contiguous()
        scan = torch.empty_like(a)
        self.mod.call("scan", a, scan, a.shape[0], a.shape[1])
        bd = torch.empty_like(b)
        self.mod.call("decay_b", scan, b.contiguous(), bd, a.shape[0], a.shape[1], b.shape[2])
        return torch.einsum("bln,blp->bpn", bd, x)    # a batched GEMM, in the library
