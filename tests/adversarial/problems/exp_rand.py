"""exp_rand: y = exp(x) on a fp32 matrix drawn from torch.rand (all of it in [0, 1))."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.exp(x)


def get_inputs():
    return [torch.rand(64, 96)]


def get_init_inputs():
    return []
