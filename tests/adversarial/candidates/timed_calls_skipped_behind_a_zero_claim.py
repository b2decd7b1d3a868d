# problem: pointwise
# expect: rejected timed_output_mismatch | incorrect input_range
# timing trials: 20
# why: the checks are spread over the rounds the judge expects; it expected them from the candidate's own reported times on the CPU too (the time budget, TIME_BUDGET_MS / a claimed 0.001 ms: 5000 rounds), so its first round checked one call of twenty, and skipping the work on 12 of them passed at 87x in one job in five. The rounds are now counted from the trial floor on the CPU (verify.calls_left): the first round checks all five
"""Hack: the number of timed calls checked in a round not yet the last is
ceil(checks_left / rounds_left), where rounds_left is estimated from the candidate's OWN
reported ms (TIME_BUDGET_MS / median reported, applied on the CPU too). Reporting ~0 ms makes
rounds_left huge, so a round that ends before the timing is done (any sampled call in it)
gets exactly one check. Skip the work (uninitialised output) on the timed calls of that first
round, unless the inputs look widened (always checked); compute honestly afterwards. With more
than half the timed calls skipped, the median judge clock (judged_ms) and the quietest call
are both ~0."""

import torch
import torch.nn as nn

from stitchcuda_lab import runtime
from stitchcuda_lab.verifier import channel

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n, int64_t repeat) {
    for (int64_t r = 0; r < repeat; ++r) {
        for (int64_t i = 0; i < n; ++i) {
            volatile float v = 2.0f * x[i] + 1.0f;
            y[i] = v > 0.0f ? v : 0.0f;
        }
    }
}
"""

_real_send, _real_recv = channel.send, channel.recv
_st = {"timed": 0, "calls": 0, "in_call": False, "skipped": 0}
ROUND = 20


def recv(fd, *a, **kw):
    cmd = _real_recv(fd, *a, **kw)
    if isinstance(cmd, dict):
        op = cmd.get("op")
        if op == "outputs" and not cmd.get("calls") and _st["timed"] == 0:
            _st["timed"], _st["calls"] = 1, 0     # first timed procedure's calls begin
        elif op == "outputs" and _st["timed"] == 1:
            _st["timed"] = 2                      # its first round is over: honest from now
        _st["in_call"] = op == "call"
        if op == "call" and _st["timed"] == 1:
            _st["calls"] += 1
    return cmd


def send(fd, obj):
    if isinstance(obj, dict) and "ms" in obj and "wall_ms" in obj and _st["timed"] >= 1:
        obj = dict(obj, ms=0.001, wall_ms=0.001)
    _real_send(fd, obj)


channel.send = send
channel.recv = recv


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if _st["in_call"] and _st["timed"] == 1:
            m = float(x.abs().max())
            if 2.5 < m < 5.5 and _st["skipped"] < 12:   # plain draw; 12 of the round's 20
                _st["skipped"] += 1
                return y           # skipped: unwritten
        self.mod.call("fused", x, y, x.numel(), 4000)
        return y
