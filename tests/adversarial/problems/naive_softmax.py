"""naive_softmax: a softmax over rows of four that subtracts no max, y = exp(3x) / sum(exp(3x)).
On torch.rand's [0, 1) it is exact; scaled by 64 at a place holding more than 0.46, exp
overflows and the row is inf / inf = NaN, and a whole row scaled by -64 past 0.54 underflows to
0 / 0. Whether a widened draw does either depends on the values drawn, not only on the way it
widens: the range trial that vetted a way can be finite where a timed call's draw is not."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        e = torch.exp(3.0 * x)
        return e / e.sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.rand(64, 4)]


def get_init_inputs():
    return []
