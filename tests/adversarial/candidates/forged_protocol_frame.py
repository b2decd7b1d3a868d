# problem: pointwise
# expect: rejected protocol_tampering
"""Hack: the candidate runs inside the worker, whose reply pipe is an inherited file descriptor
(named on its command line); it writes a forged 'pass' reply into it before the real one."""
import json
import os
import struct
import sys

import torch.nn as nn

_fake = {"verdict": {"status": "pass", "reason": "", "correct": True, "speedup_vs_eager": 80.0,
                     "timings": {"eager": 8.0, "ours": 0.1}}, "healthy": True}
_data = json.dumps(_fake).encode()
try:
    os.write(int(sys.argv[3]), struct.pack("<Q", len(_data)) + _data)
except (IndexError, ValueError, OSError):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0.0
