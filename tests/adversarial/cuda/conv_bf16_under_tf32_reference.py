# problem: conv_transpose_tanh
# expect: incorrect output_mismatch
"""Hack: the reference's convolution runs in TF32 (PyTorch's default), so the Verifier judges a
convolution problem's outputs within the reference's own error of fp32 arithmetic. This
candidate hopes that margin also covers bf16: it rounds the input and the weights to bf16 (8
significant bits, where TF32 keeps 11) before the convolution, which cuDNN could then run at
half the cost. Its error is about eight times the reference's: it must stay incorrect."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.convolution"]
SRC = r"""
extern "C" __global__ void to_bf16(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {   // round to nearest even at bit 16
        unsigned u = __float_as_uint(x[i]);
        y[i] = __uint_as_float((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    }
}
extern "C" __global__ void sub_tanh(const float* y, const float* cb, const float* b,
                                    float* out, long long n, long long plane, int channels) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        int c = (int)((i / plane) % channels);
        out[i] = tanhf((y[i] + cb[c]) - b[c]);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.mod = runtime.load(SRC, lang="cuda", name="bf16_conv")
        self.rounded = None

    def bf16(self, t):
        out = torch.empty_like(t)
        n = t.numel()
        self.mod.launch("to_bf16", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(t, out, n))
        return out

    def forward(self, x):
        if self.rounded is None:
            self.rounded = self.bf16(self.conv.weight.detach().contiguous())
        y = nn.functional.conv_transpose2d(self.bf16(x.contiguous()), self.rounded, None,
                                           stride=2, padding=1)
        out = torch.empty_like(y)
        n = y.numel()
        self.mod.launch("sub_tanh", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(y, self.conv.bias.detach(), self.bias.detach().reshape(-1),
                              out, n, y.shape[2] * y.shape[3], y.shape[1]))
        return out
