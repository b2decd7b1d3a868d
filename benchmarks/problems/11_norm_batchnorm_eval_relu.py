"""norm: BatchNorm2d in eval mode (running statistics) followed by ReLU."""

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
        with torch.no_grad():  # statistics as if trained, so eval mode is not an identity
            self.bn.running_mean.copy_(torch.randn(channels) * 0.2)
            self.bn.running_var.copy_(torch.rand(channels) + 0.5)
            self.bn.weight.copy_(torch.rand(channels) + 0.5)
            self.bn.bias.copy_(torch.randn(channels) * 0.1)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
