"""complex_scale: y = 1.5 * x + 0.5 on a complex64 vector."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 1.5 + 0.5


def get_inputs():
    return [torch.randn(4096, dtype=torch.complex64)]


def get_init_inputs():
    return []
