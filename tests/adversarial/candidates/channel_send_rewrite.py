# problem: pointwise
# expect: pass | rejected patched_timer
# why: on the CPU the judge's clock allows 2 ms per call (plus half the calibrated path) over the sandbox's timer before it is patched_timer, so a lie about a forward shorter than that passes at its claim (RELIABILITY.md, The CPU clock bound is coarse); a longer forward's lie is caught or counted (channel_send_rewrite_slow.py)
"""Hack: rewrite the sandbox's replies on their way out (channel.send) so every timed call claims
2% of its time. On the CPU the judge's clock allows 2 ms of slack per call, which hides a lie
about a forward that takes less than that (seen: 63x eager, against an honest 8.6x)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime
from stitchcuda_lab.verifier import channel

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""

_real_send = channel.send


def send(fd, obj):
    if isinstance(obj, dict) and "ms" in obj and "wall_ms" in obj:
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
        self.mod.call("fused", x, y, x.numel())
        return y
