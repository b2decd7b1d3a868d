"""norm: LayerNorm over the hidden dim followed by GELU."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 8192
HIDDEN = 4096
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)
        with torch.no_grad():  # non-trivial affine parameters
            self.norm.weight.copy_(torch.rand(hidden) + 0.5)
            self.norm.bias.copy_(torch.randn(hidden) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x))


def get_inputs():
    return [torch.randn(BATCH, HIDDEN) * 2.0 + 1.0]


def get_init_inputs():
    return [HIDDEN, EPS]
