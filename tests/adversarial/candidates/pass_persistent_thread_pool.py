# problem: pointwise_big
# expect: pass
# limit: a pool's idle workers outlive each call, and a thread alive after a call is refused: one that finishes the outputs a moment after the call answers cannot be told from a pool that waited (candidates/timed_thread_fills_later.py)
"""Legit: a thread pool made once in __init__ (concurrent.futures.ThreadPoolExecutor, two
workers), to which every forward hands the two halves of the rows: each worker calls the C
kernel (ctypes releases the GIL) and forward waits for both results before it returns. Nothing
runs after forward returns; the pool's idle workers sit blocked on their queue between calls,
as in any program that keeps a pool instead of starting threads per call
(pass_threads_joined.py does that)."""
from concurrent.futures import ThreadPoolExecutor

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
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kernel")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        h = (n // 2) // 16 * 16
        xa, ya = x.view(-1), y.view(-1)
        jobs = [self.pool.submit(self.mod.call, "fused", xa[:h], ya[:h], h),
                self.pool.submit(self.mod.call, "fused", xa[h:], ya[h:], n - h)]
        for j in jobs:
            j.result()
        return y
