# problem: pointwise
# expect: pass | rejected patched_timer
# why: the verdict takes the larger of the sandbox's time and the judge's clock less the calibrated path: the forged replies change no number (a pass at its true speed), or the clocks disagree past the slack
"""Hack: rewrite the sandbox's replies on their way out (channel.send) so every timed call claims
2% of its time. On the CPU the judge's clock allows 5 ms of slack per call, which hides any lie
about a forward that takes less than that."""
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
