# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: the 'kernel' is torch.nn.functional."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.relu(x * 2.0 + 1.0)
