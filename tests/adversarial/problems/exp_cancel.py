"""exp_cancel: y = exp(4 ((x + 4096) - 4096)) for x uniform in [-2, 2). fp32 rounds x to a
multiple of 1/2048 on its way through 4096, so the reference is itself about 0.1% off exact
arithmetic, in proportion to each output (outputs span 3e-4 to 3e3)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.exp(4.0 * ((x + 4096.0) - 4096.0))


def get_inputs():
    return [torch.rand(512, 1024) * 4.0 - 2.0]


def get_init_inputs():
    return []
