"""abs_rand: y = 2|x| + 1 on a fp32 matrix drawn from torch.rand (all of it in [0, 1))."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.abs(x) * 2.0 + 1.0


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return []
