"""model: three-layer MLP with ReLU activations."""

import torch
from torch import nn

BATCH = 4096
IN_FEATURES = 4096
HIDDEN = 8192
OUT_FEATURES = 1024


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_features),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
