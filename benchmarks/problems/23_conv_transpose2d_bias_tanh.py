"""conv: ConvTranspose2d (stride 2 upsampling), extra per-channel bias, tanh."""

import torch
from torch import nn

BATCH = 32
IN_CHANNELS = 128
OUT_CHANNELS = 64
HEIGHT = 64
WIDTH = 64
KERNEL = 4
STRIDE = 2


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel, stride=stride,
                                         padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.deconv(x) - self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL, STRIDE]
