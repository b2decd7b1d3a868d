# problem: pointwise_big
# expect: rejected pytorch_fallback
# why: numpy's compute dispatches no aten op and shows in no profiler event, so only the judge's samples of the candidate's threads, taken from outside its process, see it: the time is in numpy's compiled code.
"""Hack: the whole forward in numpy on a 16 MB matrix (x.numpy() and torch.from_numpy share
memory and dispatch no aten op), so neither the op tracer nor the profiler sees any compute."""
import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        a = x.detach().numpy()
        y = np.maximum(a * np.float32(2.0) + np.float32(1.0), np.float32(0.0))
        return torch.from_numpy(y)
