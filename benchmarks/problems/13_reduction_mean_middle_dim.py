"""reduction: sum and mean along a middle (strided) dim of a 3-D tensor."""

import torch
from torch import nn

BATCH = 128
REDUCE = 1024
INNER = 512


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = torch.sum(x, dim=self.dim)
        return total * 0.5 + torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, INNER)]


def get_init_inputs():
    return [1]
