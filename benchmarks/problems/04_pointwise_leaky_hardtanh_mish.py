"""pointwise: leaky ReLU, hardtanh and Mish mixed with a subtraction."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 16384
DIM = 4096
NEGATIVE_SLOPE = 0.01
SUBTRACT = 0.25


class Model(nn.Module):
    def __init__(self, negative_slope: float, subtract: float):
        super().__init__()
        self.negative_slope = negative_slope
        self.subtract = subtract

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.leaky_relu(x, self.negative_slope)
        y = F.hardtanh(y - self.subtract, min_val=-1.0, max_val=1.0)
        return F.mish(y) + x


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [NEGATIVE_SLOPE, SUBTRACT]
