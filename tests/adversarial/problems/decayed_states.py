"""decayed_states: a state-space model's chunk states (Mamba2's SSD, one chunk): a scan of
random log-decays, exp of its differences (up to e^20), then a sum over the chunk of terms that
cancel. The fp32 reference misses its float64 computation on a few hundred of the 262 k
outputs, a few of them by far more than its typical error (a tail): another summation order
misses on about as many, others."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b, x):
        scan = torch.cumsum(a, dim=-1)
        decay = torch.exp(scan[:, -1:] - scan)
        return torch.einsum("bln,bl,blp->bpn", b, decay, x)


def get_inputs():
    return [torch.randn(512, 64), torch.randn(512, 64, 16), torch.rand(512, 64, 32)]


def get_init_inputs():
    return []
