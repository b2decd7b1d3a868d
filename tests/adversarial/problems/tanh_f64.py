"""tanh_f64: y = tanh(x) on a float64 matrix (a float64 problem asks for float64 accuracy)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(64, 96, dtype=torch.float64)]


def get_init_inputs():
    return []
