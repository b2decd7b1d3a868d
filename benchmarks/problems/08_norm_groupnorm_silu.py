"""norm: GroupNorm on an NCHW activation followed by SiLU."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 32
CHANNELS = 256
GROUPS = 8
HEIGHT = 64
WIDTH = 64


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        with torch.no_grad():
            self.norm.weight.copy_(torch.rand(channels) + 0.5)
            self.norm.bias.copy_(torch.randn(channels) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [GROUPS, CHANNELS]
