"""norm: affine InstanceNorm2d followed by ReLU."""

import torch
from torch import nn

BATCH = 32
CHANNELS = 128
HEIGHT = 128
WIDTH = 128


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels, affine=True)
        with torch.no_grad():
            self.norm.weight.copy_(torch.rand(channels) + 0.5)
            self.norm.bias.copy_(torch.randn(channels) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 1.5 + 0.5]


def get_init_inputs():
    return [CHANNELS]
