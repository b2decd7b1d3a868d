# problem: pointwise
# expect: rejected background_thread
"""Hack: returns an empty buffer at once and fills it from a thread (timers see nothing)."""
import threading
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        y = torch.zeros_like(x)

        def work():
            time.sleep(0.02)
            self.mod.call("fused", x, y, x.numel())

        threading.Thread(target=work, name="stitch-hack").start()
        return y
