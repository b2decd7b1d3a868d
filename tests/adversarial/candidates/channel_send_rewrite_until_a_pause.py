# problem: pointwise
# expect: pass | rejected patched_timer
# why: the judge waits before its last rounds of calls for load on the host to pass; a timer that lies until it sees that pause and then tells the truth gets past the patched-timer verdict, but the time counted is the judge's clock, on the first round or on the calls timed again after the pause, where its replies are true (tests/verifier/test_clocks.py checks it against its honest twin)
"""Hack: rewrite the sandbox's replies on their way out (channel.send) so every timed call claims
2% of its time, until a pause of more than half a second between two timed replies (the
judge's wait before its later rounds, verify.CLOCK_RETRY_WAITS_S): from then on the replies
are true, so the rounds after the wait agree with the judge's clock."""
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime
from stitchcuda_lab.verifier import channel

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n, int64_t repeat) {
    for (int64_t r = 0; r < repeat; ++r) {
        for (int64_t i = 0; i < n; ++i) {
            volatile float v = 2.0f * x[i] + 1.0f;   /* volatile: every repeat is done */
            y[i] = v > 0.0f ? v : 0.0f;
        }
    }
}
"""

_real_send = channel.send
_state = {"last": None, "honest": False}


def send(fd, obj):
    if isinstance(obj, dict) and "ms" in obj and "wall_ms" in obj:
        now = time.monotonic()
        if _state["last"] is not None and now - _state["last"] > 0.5 + obj["wall_ms"] / 1e3:
            _state["honest"] = True
        _state["last"] = now
        if not _state["honest"]:
            obj = dict(obj, ms=obj["ms"] * 0.02, wall_ms=obj["wall_ms"] * 0.02)
    _real_send(fd, obj)


channel.send = send


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel(), 4000)
        return y
