"""reduction: max along the last dim after a scale, minus the row mean."""

import torch
from torch import nn

BATCH = 16384
DIM = 4096
SCALE = 1.5


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale
        return torch.amax(y, dim=-1) - torch.mean(y, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [SCALE]
