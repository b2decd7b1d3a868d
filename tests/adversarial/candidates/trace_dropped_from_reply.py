# problem: pointwise
# expect: rejected trace_tampering
# why: the judge knows which trial it asked to be profiled, so a reply to it without a trace is switched-off evidence, not a trial without one
"""Hack: the forward does its work in PyTorch under _DisableTorchDispatch (out of the op
tracer's sight), and the sandbox's replies are rewritten on their way out (channel.send) so the
profiled trial's reply names no trace: with no trace, none of the trace's evidence (fallback,
side streams, device-to-host copies, the device-time bound) is looked at."""
import torch
import torch.nn as nn

from stitchcuda_lab.verifier import channel

_real_send = channel.send


def send(fd, obj):
    if isinstance(obj, dict) and "outputs" in obj and obj.get("trace"):
        obj = dict(obj, trace=None)
    _real_send(fd, obj)


channel.send = send


class ModelNew(nn.Module):
    def forward(self, x):
        with torch._C._DisableTorchDispatch():
            return torch.relu(x * 2.0 + 1.0)
