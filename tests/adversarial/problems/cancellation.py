"""pointwise: (x + 4096) - 4096, which fp32 rounds to the nearest 1/2048 on the way: the
reference itself is up to 2.4e-4 away from x, beyond fp32's tolerance of 1e-4."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x + 4096.0) - 4096.0


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
