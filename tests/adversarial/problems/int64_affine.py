"""int64_affine: y = 3x + 1 on int64 values drawn up to 2^61 (hashing and index arithmetic
work on such integers): integer outputs are compared exactly."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 3 + 1


def get_inputs():
    return [torch.randint(-(2 ** 61), 2 ** 61, (256, 1024), dtype=torch.int64)]


def get_init_inputs():
    return []
