"""pointwise: y = x * sigmoid(x) on a matrix whose row count is drawn at random per call."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    rows = int(torch.randint(20, 200, (1,)))
    return [torch.randn(rows, 33)]


def get_init_inputs():
    return []
