"""ragged_big: y = x * sigmoid(x) on a matrix of 4096 columns whose row count is drawn per
call between 16 and 2047 (up to 32 MB: milliseconds on a CPU, and calls of very different
lengths)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    rows = int(torch.randint(16, 2048, (1,)))
    return [torch.randn(rows, 4096)]


def get_init_inputs():
    return []
