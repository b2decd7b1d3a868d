"""pointwise: six-op chain with per-channel and per-row broadcasting on an NCHW tensor."""

import torch
from torch import nn

BATCH = 64
CHANNELS = 256
HEIGHT = 64
WIDTH = 64


class Model(nn.Module):
    def __init__(self, channels: int, width: int):
        super().__init__()
        self.gain = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)   # broadcast over H, W
        self.shift = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.col_bias = nn.Parameter(torch.randn(width) * 0.1)       # broadcast over N, C, H

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor) -> torch.Tensor:
        # row_scale is (N, 1, H, 1): broadcast over channels and columns
        y = x * self.gain
        y = y + self.shift
        y = y * row_scale
        y = torch.relu(y)
        y = y + self.col_bias
        return torch.exp(-y * y)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH), torch.rand(BATCH, 1, HEIGHT, 1)]


def get_init_inputs():
    return [CHANNELS, WIDTH]
