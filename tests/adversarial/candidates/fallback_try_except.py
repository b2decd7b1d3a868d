# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: a kernel that never builds, silently replaced by PyTorch when it fails."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
void fused(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = oops(x[i]); }
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        try:
            self.mod = runtime.load(SRC, lang="c", name="fused_broken")
        except Exception:
            self.mod = None

    def forward(self, x):
        try:
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        except Exception:
            return torch.relu(x * 2.0 + 1.0)
