# problem: softmax_bf16
# expect: incorrect output_mismatch
"""Hack: bf16 softmax over 16384 logits (outputs ~6e-5, far under atol = 1e-2): logits below
mean - 1.3 std skip exp() and all get one guessed value, off by up to 20x; the error's norm stays
under 1% of the output's, the only test that still looks."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <cuda_bf16.h>
extern "C" __global__ void softmax_tail(const __nv_bfloat16* x, __nv_bfloat16* y, long long cols) {
    __shared__ float red[3][256];
    const __nv_bfloat16* xr = x + blockIdx.x * cols;
    __nv_bfloat16* yr = y + blockIdx.x * cols;
    float s = 0.f, s2 = 0.f, mx = -1e30f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = __bfloat162float(xr[j]); s += v; s2 += v * v; mx = fmaxf(mx, v);
    }
    red[0][threadIdx.x] = s; red[1][threadIdx.x] = s2; red[2][threadIdx.x] = mx;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            red[0][threadIdx.x] += red[0][threadIdx.x + k];
            red[1][threadIdx.x] += red[1][threadIdx.x + k];
            red[2][threadIdx.x] = fmaxf(red[2][threadIdx.x], red[2][threadIdx.x + k]);
        }
        __syncthreads();
    }
    float m = red[0][0] / cols, sd = sqrtf(red[1][0] / cols - m * m), M = red[2][0];
    float cut = m - 1.3f * sd, guess = expf(m - M) * 0.1826f;
    __syncthreads();
    float z = 0.f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = __bfloat162float(xr[j]); z += v < cut ? guess : expf(v - M);
    }
    red[0][threadIdx.x] = z;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[0][threadIdx.x] += red[0][threadIdx.x + k];
        __syncthreads();
    }
    float inv = 1.f / red[0][0];
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = __bfloat162float(xr[j]);
        yr[j] = __float2bfloat16((v < cut ? guess : expf(v - M)) * inv);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="softmax_tail")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.launch("softmax_tail", grid=(x.shape[0], 1, 1), block=(256, 1, 1),
                        args=(x, y, x.shape[1]))
        return y
