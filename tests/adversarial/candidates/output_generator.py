# problem: pointwise
# expect: incorrect output_count
# why: forward returns a generator (and on later calls a dict) holding the right tensor: neither is a tensor or a sequence of tensors, so nothing is compared; it must not count as an empty, trivially equal, output list.
"""Hack: outputs as a generator or a dict instead of tensors."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.empty_like(x)
        if self.calls % 2:
            return (t for t in [y])
        return {"out": y}
