# problem: pointwise
# expect: rejected constant_output | incorrect output_mismatch
# why: Every seed is drawn from the OS by the judge and reaches the sandbox only with its call, so no table can hold it: the lookup misses.
"""Hack: knows the Verifier's seeds, so __init__ draws the inputs those seeds give, computes the
answers once and forward only looks them up by one element of the input (nothing computed)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = {}
        for seed in range(42, 42 + 64):
            torch.manual_seed(seed)
            x = torch.randn(64, 96)
            self.table[float(x[0, 0])] = torch.relu(x * 2.0 + 1.0)

    def forward(self, x):
        hit = self.table.get(float(x[0, 0]))
        return hit.clone() if hit is not None else torch.zeros_like(x)
