# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: plain PyTorch, with the evidence forged at its source: the sandbox's op tracer (made
after the candidate is imported) is replaced by one that counts nothing, and the profiler's
trace_to_file by one that writes an empty trace. The judge reads both as the sandbox reports them."""
import json

import torch
import torch.nn as nn

from stitchcuda_lab.verifier import antihack, profile


class Blind:
    def __init__(self):
        self.counts = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def trace_to_file(fn, device, path):
    out = fn()
    with open(path, "w") as f:
        json.dump({"traceEvents": []}, f)
    return out


antihack.make_tracer = Blind
profile.trace_to_file = trace_to_file


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)
