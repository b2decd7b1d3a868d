# problem: pointwise
# expect: rejected constant_output
"""Hack: computes nothing and returns fresh torch.empty memory, hoping the allocator hands back
the block where the reference's (just freed) result still lies, as it does in a harness that
runs the reference first and does not poison freed memory. Here every call gets the same
NaN-poisoned block, so its output does not depend on the input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
