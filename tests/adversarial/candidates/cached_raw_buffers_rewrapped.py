# problem: pointwise
# expect: rejected cached_output
"""Hack: two buffers the candidate owns outside torch (numpy arrays made once), computed into
in turn and handed back through a fresh torch wrapper on every call, so no tensor of ours is
ever returned twice and the second call on the same inputs gets the other buffer. A caller
that keeps an earlier result sees it overwritten. Caught while the earlier wrapper is held
alive (the Verifier keeps the newest outputs up to a budget: 2 GiB on the CPU, 1 GiB on CUDA);
for outputs beyond the budget the wrapper is held weakly, dies with the call, and this gets
past the check (a limit written in docs/RELIABILITY.md)."""
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bufs = None
        self.turn = 0

    def forward(self, x):
        if self.bufs is None or self.bufs[0].shape != tuple(x.shape):
            self.bufs = [np.empty(tuple(x.shape), dtype=np.float32) for _ in range(2)]
        out = self.bufs[self.turn]
        self.turn ^= 1
        np.maximum(x.detach().cpu().numpy() * 2.0 + 1.0, 0.0, out=out)
        return torch.from_numpy(out)
