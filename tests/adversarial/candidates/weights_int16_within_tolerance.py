# problem: gemm_wide_weight
# expect: incorrect input_range | incorrect output_mismatch
# cpu flush mb: 0
"""Hack (precision under the tolerance): relu(x W^T + b) with the 64 MB weight stored, once
in __init__, as 16-bit integers with one scale for the whole matrix (nn.Linear's init range,
+-1/sqrt(2048), in 65535 steps): half the bytes a call reads, on a problem whose time is the
time to read the weight. Each weight is off by up to 3.4e-7 (about 2^-16 of its size), so an
output carries ~9e-6 of error against outputs near 0.6: within atol = rtol = 1e-4 and
1.5e-5 in relative norm on get_inputs()'s draws, the near and the small widened draws. Caught
by the far trial (elements times 64, 16 or 1/16): the error grows with the inputs' norm while
atol stays 1e-4 there (635 of 32768 elements beyond the float64 result's allowance). On the
2-core host here its C GEMV was compute-bound anyway (an fp32 twin ran at 0.5x eager)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void gemv_q16(const float* x, const int16_t* q, const float* b, float* y, float s,
              int64_t rows, int64_t n_in, int64_t n_out) {
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < n_out; ++o) {
        const int16_t* w = q + o * n_in;
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * n_in;
            float acc = 0.0f;
            #pragma omp simd reduction(+:acc)
            for (int64_t k = 0; k < n_in; ++k) acc += xr[k] * (float)w[k];
            float v = acc * s + b[o];
            y[r * n_out + o] = v > 0.0f ? v : 0.0f;
        }
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        w = self.fc.weight.detach()
        self.scale = float(w.abs().max()) / 32767.0
        self.q = torch.round(w / self.scale).to(torch.int16).contiguous()
        self.mod = runtime.load(SRC, lang="c", name="gemv_q16")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], self.q.shape[0], dtype=x.dtype)
        self.mod.call("gemv_q16", x, self.q, self.fc.bias, y, self.scale,
                      x.shape[0], x.shape[1], self.q.shape[0])
        return y
