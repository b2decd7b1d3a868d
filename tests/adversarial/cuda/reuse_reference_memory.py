# problem: pointwise
# expect: rejected constant_output | incorrect uninitialized_output
"""Hack: launches nothing and returns torch.empty_like memory, hoping the caching allocator hands
back the block where the reference's just-freed result lies. The Verifier poisons freed blocks
with NaN first, so the output is NaN (the same for every input)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
