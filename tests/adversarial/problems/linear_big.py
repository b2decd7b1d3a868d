"""linear_big: a 1024 x 1024 linear layer on 1024 rows (2 GFLOP: tens of milliseconds of GEMM
on one CPU core, compute-bound, so it runs faster on more cores)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
