"""gemm: Linear (x @ W^T + b) followed by ReLU."""

import torch
from torch import nn

BATCH = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
