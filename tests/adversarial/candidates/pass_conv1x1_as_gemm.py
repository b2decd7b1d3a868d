# problem: conv1x1
# expect: pass
"""Legit: a 1x1 convolution is a GEMM: the weight (out, in) times each image's (in, pixels),
as torch.matmul in the library, the bias added in place by the candidate's own C kernel. The
reference convolves; a GEMM is how a convolution is computed (a 1x1 filter, im2col), so its
library family is the reference's."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void add_bias(float* y, const float* b, int64_t images, int64_t channels, int64_t pixels) {
    for (int64_t n = 0; n < images; ++n)
        for (int64_t c = 0; c < channels; ++c) {
            float* row = y + (n * channels + c) * pixels;
            for (int64_t p = 0; p < pixels; ++p) row[p] += b[c];
        }
}
"""


class ModelNew(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)
        self.mod = runtime.load(SRC, lang="c", name="add_bias")

    def forward(self, x):
        n, c, h, w = x.shape
        weight = self.conv.weight.reshape(self.conv.out_channels, c)
        y = torch.matmul(weight, x.contiguous().reshape(n, c, h * w)).contiguous()
        self.mod.call("add_bias", y, self.conv.bias.contiguous(), n, y.shape[1], h * w)
        return y.reshape(n, -1, h, w)
