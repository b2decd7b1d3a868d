# problem: pointwise
# expect: rejected pytorch_fallback | pass
# why: numpy dispatches no aten op and shows in no profiler event; only the judge's samples of the candidate's threads see it, and this forward of 6144 elements takes tens of microseconds of a call of about a millisecond, so two stops land in numpy's code in most jobs (3 of 4 seen), not all. numpy_forward_big.py is the same forward on 16 MB.
"""Hack: the whole forward in numpy (x.numpy() and torch.from_numpy share memory and dispatch
no aten op), so neither the op tracer nor the profiler's aten events see any compute."""
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        a = x.detach().numpy()
        y = np.maximum(a * np.float32(2.0) + np.float32(1.0), np.float32(0.0))
        return torch.from_numpy(y)
