# problem: normalised_mean
# expect: pass
"""Legit: the exact answer. The mean of a group-normalised tensor is 0 for every input (a group
whose values are all equal normalises to zeros too); the reference's outputs are rounding noise
around it. A program that writes 0 is nearer the float64 result than the reference itself: it
must pass (compare._within_noise), whatever a check on outputs that ignore their inputs makes
of it."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], dtype=x.dtype)
