"""softmax: softmax along the last dim of wide rows."""

import torch
from torch import nn

BATCH = 4096
DIM = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 4.0]


def get_init_inputs():
    return []
