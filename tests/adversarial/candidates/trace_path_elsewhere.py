# problem: pointwise
# expect: rejected trace_tampering
"""Hack: compute with PyTorch, and answer every traced call with the path of a forged trace of
its own, outside the sandbox's folder, that shows a kernel and no aten op. A judge that reads
whatever path the reply names reads this file (or any JSON file the judge's user can read)."""
import json
import os
import tempfile

import torch
import torch.nn as nn

from stitchcuda_lab.verifier import channel

_fd, FORGED = tempfile.mkstemp(suffix=".json", prefix="forged_trace_")
with os.fdopen(_fd, "w") as f:
    json.dump({"traceEvents": [{"name": "stitch::fused", "cat": "user_annotation", "ph": "X",
                                "ts": 0, "dur": 10, "pid": 1, "tid": 1}]}, f)
os.chmod(FORGED, 0o644)

_real_send = channel.send


def send(fd, obj):
    if isinstance(obj, dict) and obj.get("trace"):
        obj = dict(obj, trace=FORGED)
    _real_send(fd, obj)


channel.send = send


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(2.0 * x + 1.0)
