# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: ModelNew is the reference Model under another name."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


class ModelNew(Model):
    pass
