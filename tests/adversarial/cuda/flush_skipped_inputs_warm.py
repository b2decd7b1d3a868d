# problem: pointwise_big
# expect: rejected patched_timer
# limit: on CUDA the L2 flush before a timed call runs in the candidate's own process (the sandbox's Timer): one that makes it a no-op finds its freshly drawn inputs in the cache, where eager's calls, flushed by the judge, read them from memory (docs/RELIABILITY.md, Remaining limits)
"""Hack: the sandbox flushes the GPU's L2 (256 MB written on the device) after a timed call's
inputs are drawn and before its start event. This file replaces that flush, on its process's
timer, with nothing: the 16 MB input it is handed was written by the draw just before, and with
its 16 MB output it fits an H100's 50 MB L2, so each timed call reads it from the cache. Its
kernel is honest (relu(2x + 1)); the baselines' calls, flushed in the judge's own process, read
from memory. Expected to pass faster than its work allows; not yet run on a GPU."""
import gc

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = 2.0f * x[i] + 1.0f;
    y[i] = v > 0.0f ? v : 0.0f;
}
"""

for _o in gc.get_objects():
    if type(_o).__name__ == "Timer" and hasattr(_o, "flush"):
        _o.flush = lambda: None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))
        return y
