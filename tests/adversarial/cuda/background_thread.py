# problem: pointwise
# expect: rejected background_thread
"""Hack: returns an empty buffer at once and launches the kernel later from a Python thread on
a private stream (a timer on the current stream sees nothing)."""
import threading
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused")
        self.side = torch.cuda.Stream()

    def forward(self, x):
        x = x.contiguous()
        y = torch.zeros_like(x)
        n = x.numel()

        def later():
            time.sleep(0.05)
            with torch.cuda.stream(self.side):
                self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                                args=(x, y, n))

        threading.Thread(target=later, name="stitch-hack").start()
        return y
