"""LayerNorm + GELU + residual: a normalisation with a pointwise epilogue and a residual add.

Eager PyTorch runs three kernels (layer_norm, gelu, add) and reads the activations three times;
a fused kernel computes each row's mean and variance, normalises, applies GELU and adds the
residual in one pass over the row.
"""

import torch
import torch.nn as nn

TOKENS = 2048
HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():   # non-trivial affine parameters, so a kernel that drops them fails
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.normal_(0.0, 0.1)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.norm(x))


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
