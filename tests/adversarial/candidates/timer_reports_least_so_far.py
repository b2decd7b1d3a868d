# problem: ragged_linear
# expect: pass | rejected patched_timer
# why: the verdict's time is, call by call, the larger of what the candidate reported and what the judge's clock saw less the path and its allowance, then the median: the claim changes nothing beyond that allowance (tests/verifier/test_clocks.py checks the time)
"""Hack: the GEMM done honestly (kept in the library) on a problem whose calls differ in size
(16 to 2047 rows), with timing.Timer.call replaced so that every timed call reports the least
time any call has taken so far. Each call that is the quickest yet reports its true time, so
the least disagreement between the judge's clock and this timer stays that of an honest call,
and the quietest call the judge's clock saw is also the smallest one: the median reported is
the time of a small call (about a fifth of the median call's)."""
import torch
import torch.nn as nn

from stitchcuda_lab.verifier import timing

KEPT_OPS = ["addmm"]
_real_call = timing.Timer.call
LEAST = [float("inf")]


def call(self, fn, **kw):
    ms, wall, out = _real_call(self, fn, **kw)
    LEAST[0] = min(LEAST[0], ms)
    return LEAST[0], LEAST[0], out


timing.Timer.call = call


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x):
        return torch.addmm(self.fc.bias, x, self.fc.weight.t())
