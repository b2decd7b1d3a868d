"""offset_residual: ((x + 2^27) - 2^27) - x, a residual through a large offset. In exact
arithmetic every output is 0; fp32 rounds x to a multiple of 16 on its way through 2^27, so the
reference's outputs are its rounding error alone (about -x, |x| < 8), with no sum behind it:
no other fp32 program of this expression is further from 0 than one rounding of x + 2^27."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return ((x + 134217728.0) - 134217728.0) - x


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
