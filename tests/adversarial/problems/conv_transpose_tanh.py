"""conv: a transposed convolution, minus a per-channel bias, tanh (KernelBench level 2's shape of
problem). PyTorch runs its fp32 convolution on TF32 tensor cores, so the reference itself is
about 1e-3 away from fp32 arithmetic."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        return torch.tanh(self.conv(x) - self.bias)


def get_inputs():
    return [torch.rand(16, 64, 64, 64)]


def get_init_inputs():
    return [64]
