"""conv: conv_transpose_tanh at the size of KernelBench's level 2 problems (a 2.1 GB output):
large enough that copying a channels-last output the slow way would cost milliseconds a call
outside the candidate's timer."""
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
    return [torch.rand(32, 64, 256, 256)]


def get_init_inputs():
    return [64]
