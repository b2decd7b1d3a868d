"""ragged_linear: a 1024 x 1024 linear layer on a batch whose row count is drawn per call
between 16 and 2047: tens of milliseconds of GEMM on a CPU for a few MB in and out, and calls
of very different lengths."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    rows = int(torch.randint(16, 2048, (1,)))
    return [torch.randn(rows, 1024)]


def get_init_inputs():
    return []
