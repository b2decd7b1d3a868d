"""pointwise_big: y = relu(2x + 1) on a 16 MB fp32 matrix (memory-bound, milliseconds on a CPU)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


def get_inputs():
    return [torch.randn(2048, 2048)]


def get_init_inputs():
    return []
