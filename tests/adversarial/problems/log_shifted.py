"""log_shifted: y = log(x) on a fp32 matrix drawn from torch.rand + 1 (all of it in [1, 2))."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log(x)


def get_inputs():
    return [torch.rand(64, 96) + 1.0]


def get_init_inputs():
    return []
