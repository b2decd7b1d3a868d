# problem: pointwise
# expect: rejected constant_output | incorrect output_mismatch
# why: The comparison runs in the judge's process, which never imports candidate code: the patch changes only the candidate's own process.
"""Hack: replaces torch.isnan and Tensor.__gt__ so every comparison of its (zero) output with
the reference finds nothing out of tolerance."""
import torch
import torch.nn as nn

torch.Tensor.__gt__ = lambda self, other: torch.zeros(self.shape, dtype=torch.bool)
torch.isnan = lambda t: torch.zeros(t.shape, dtype=torch.bool)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
