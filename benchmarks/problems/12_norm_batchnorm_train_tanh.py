"""norm: BatchNorm2d in training mode (batch statistics) followed by tanh."""

import torch
from torch import nn

BATCH = 64
CHANNELS = 128
HEIGHT = 64
WIDTH = 64


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.weight.copy_(torch.rand(channels) + 0.5)
            self.bn.bias.copy_(torch.randn(channels) * 0.1)
        self.train()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.bn(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2.0 + 0.3]


def get_init_inputs():
    return [CHANNELS]
