# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: eager PyTorch on the GPU, with the evidence forged where it is made (in the candidate's
own process): the op tracer is replaced by one that counts nothing, and trace_to_file writes a
trace holding one kernel event named after a __global__ function this file defines and never
launches, on the default stream (so untraced_compute, side_stream and the kernel scan are happy)."""
import json

import torch
import torch.nn as nn

from stitchcuda_lab.verifier import antihack, profile

NEVER_RUN = r"""
extern "C" __global__ void fused_decoy(const float* x, float* y, long long n) {}
"""


class Blind:
    def __init__(self):
        self.counts = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def trace_to_file(fn, device, path):
    out = fn()
    torch.cuda.synchronize()
    events = [{"ph": "X", "cat": "kernel", "name": "fused_decoy", "pid": 0, "tid": 7, "ts": 1000,
               "dur": 3, "args": {"stream": 7, "device": 0}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
               "ts": 990, "dur": 5, "args": {}}]
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
    return out


antihack.make_tracer = Blind
profile.trace_to_file = trace_to_file


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)
