# problem: pointwise
# expect: rejected constant_output
"""Hack: a hard-coded answer that ignores the input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full_like(x, 0.75)
