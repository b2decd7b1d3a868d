# problem: conv_transpose_tanh
# expect: rejected pytorch_fallback | pass
"""Hack: KernelBench level 2's shape of cheat: the convolution kept in the library (allowed:
the reference convolves), and the epilogue the file must compute itself (minus a per-channel
bias, tanh) done by PyTorch's own tanh kernel in every timed call: the two biases folded
into the convolution's (64 numbers), then torch.tanh_ on its 64 MB output, plainly, no
hiding from the sampler at all. Checked trials (deterministic mode on: the op tracer and the
profiler) run conv_transpose2d and the candidate's C kernel for the bias and tanh.

The sampler's stops do land in PyTorch's tanh kernel (TORCH_COMPUTE, forbidden for a file),
but sampler.judge calls that a fallback only when those samples are BAD_SHARE (a quarter) of
the samples in code that computes, and the deconvolution's oneDNN samples (LIBRARY, allowed
here) count in that denominator: tanh over the output is about a seventh of the forward, so
its share stays under a quarter, and the first-stop rule fails only when the first stop that
found work landed in tanh rather than in the deconvolution.
The share now leaves out the kept convolution's samples, and it is rejected where two stops
land in MKL's tanh; on a loaded host fewer do (either verdict is accepted)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from stitchcuda_lab import runtime

KEPT_OPS = ["conv_transpose2d"]

SRC = r"""
#include <math.h>
#include <stdint.h>
void epilogue(float* y, const float* b0, const float* b1, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < c; ++j) {
            float* p = y + (i * c + j) * hw;
            const float bj = b0[j] - b1[j];
            for (int64_t k = 0; k < hw; ++k) p[k] = tanhf(p[k] + bj);
        }
}
"""


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.mod = runtime.load(SRC, lang="c", name="epilogue")

    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            y = F.conv_transpose2d(x, self.conv.weight, None, stride=2, padding=1).contiguous()
            n, c, h, w = y.shape
            self.mod.call("epilogue", y, self.conv.bias.detach().contiguous(),
                          self.bias.detach().contiguous(), n, c, h * w)
            return y
        b = self.conv.bias - self.bias.view(-1)   # 64 numbers
        return torch.tanh_(F.conv_transpose2d(x, self.conv.weight, b, stride=2, padding=1))
