# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: tensor methods instead of a kernel."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.mul(2.0).add(1.0).clamp_min(0.0)
