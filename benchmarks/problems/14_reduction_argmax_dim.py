"""reduction: argmax along dim 1 (int64 indices)."""

import torch
from torch import nn

BATCH = 128
REDUCE = 4096
INNER = 256


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, REDUCE, INNER)]


def get_init_inputs():
    return [1]
