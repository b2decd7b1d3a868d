"""two_outputs: (relu(2x + 1), 2x) from one fp32 matrix: a forward with two outputs."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 2.0
        return torch.relu(y + 1.0), y


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return []
