# problem: conv_transpose_tanh_big
# expect: pass
"""Legit: pass_conv_channels_last at KernelBench's size, its 2.1 GB output channels-last. The
judge's clock covers the copy of each timed call's outputs into its arena; copied through a
contiguous temporary, that copy took 5 ms a call more than the reference's NCHW output (on
the H200, 2026-12-04) and an honest program was rejected as patched_timer. The arena copies a
dense tensor as it lies now."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.convolution"]
SRC = r"""
extern "C" __global__ void sub_tanh(const float* y, const float* cb, const float* b,
                                    float* out, long long n, int channels) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {   // channels-last: the channel is the fastest index
        int c = (int)(i % channels);
        out[i] = tanhf((y[i] + cb[c]) - b[c]);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.conv.to(memory_format=torch.channels_last)
        self.mod = runtime.load(SRC, lang="cuda", name="sub_tanh")

    def forward(self, x):
        nhwc = torch.channels_last
        y = nn.functional.conv_transpose2d(x.contiguous(memory_format=nhwc),
                                           self.conv.weight.detach(), None, stride=2, padding=1)
        y = y.contiguous(memory_format=nhwc)   # what the kernel's indexing assumes
        out = torch.empty_like(y)              # channels-last too
        n = y.numel()
        self.mod.launch("sub_tanh", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(y, self.conv.bias.detach(), self.bias.detach().reshape(-1),
                              out, n, y.shape[1]))
        return out
