# problem: pointwise
# expect: rejected background_thread | rejected timed_output_mismatch | rejected patched_timer
"""Hack: in timed calls (deterministic mode off) forward returns an empty tensor at once and a
host thread launches the kernel a millisecond later, after the timer's synchronize: the timed
region holds no kernel, and the output is ready long before the judge asks for it."""
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

    def _launch(self, x, y):
        n = x.numel()
        self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():
            self._launch(x, y)
            return y

        def later():
            time.sleep(0.001)
            self._launch(x, y)
            torch.cuda.synchronize()
        threading.Thread(target=later, daemon=True).start()
        return y
