"""norm: RMS norm written out as x * rsqrt(mean(x^2) + eps) * weight."""

import torch
from torch import nn

BATCH = 16
SEQ = 1024
HIDDEN = 4096
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, EPS]
