"""Small MLP: Linear -> ReLU -> Linear, with a bias + scale + tanh epilogue after the second GEMM.

The two matrix products belong to the vendor library; what a kernel can win is the epilogues:
bias + ReLU after the first GEMM and bias + scale + tanh after the second, each fused into one
pass instead of several.
"""

import torch
import torch.nn as nn

BATCH = 512
IN_FEATURES = 1024
HIDDEN = 2048
OUT_FEATURES = 512


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int, scale: float):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return torch.tanh(self.fc2(h) * self.scale)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES, 0.5]
