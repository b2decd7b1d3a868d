"""pointwise: y = relu(2x + 1) on a small fp32 matrix."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return []
