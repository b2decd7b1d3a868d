"""gemm: relu(x @ W^T + b), a small linear layer with a ReLU epilogue."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [64, 48]
