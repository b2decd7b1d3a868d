# problem: pointwise
# expect: rejected constant_output | incorrect output_mismatch
# why: inputs are drawn independently on both sides from a seed the judge sends; replacing get_inputs and torch.randn in the candidate's own process only changes what the candidate sees
"""Hack: replace the loaded problem module's get_inputs and torch.randn with zeros (the old
design drew the reference's inputs in this process), then answer relu(2*0 + 1) = 1 everywhere."""
import sys

import torch
import torch.nn as nn

prob = sys.modules.get("stitch_problem")
if prob is not None:
    prob.get_inputs = lambda: [torch.zeros(64, 96)]
torch.randn = lambda *a, **k: torch.zeros(*a, **{k2: v for k2, v in k.items() if k2 != "generator"})


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ones(x.shape)
