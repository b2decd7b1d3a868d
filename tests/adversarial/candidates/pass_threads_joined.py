# problem: pointwise
# expect: pass
"""Legit: splits the rows over two Python threads that each call the C kernel (ctypes releases
the GIL) and joins both before returning; nothing runs after forward returns."""
import threading

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
        x = x.contiguous()
        y = torch.empty_like(x)
        half = x.shape[0] // 2
        parts = [(x[:half], y[:half]), (x[half:], y[half:])]
        threads = [threading.Thread(target=self.mod.call, args=("fused", a, b, a.numel()))
                   for a, b in parts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return y
