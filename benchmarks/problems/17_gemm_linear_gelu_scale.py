"""gemm: Linear followed by exact GELU and a scalar scale."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2048
IN_FEATURES = 4096
OUT_FEATURES = 8192
SCALE = 2.0


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
