"""gemm_wide_weight: relu(x W^T + b) with a 64 MB weight and four rows of input: each call
reads the whole weight once, so its time is the time to bring the weight in from memory, or
from the cache where the last call left it."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 2048)]


def get_init_inputs():
    return [2048, 8192]
