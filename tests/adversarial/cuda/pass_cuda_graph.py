# problem: pointwise
# expect: pass
"""Legit: the kernel launch captured once in a CUDA graph and replayed (static buffers; the
output is copied out so callers never share memory between calls)."""
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
        self.graph = None

    def _capture(self, x):
        self.static_x = torch.empty_like(x)
        self.static_y = torch.empty_like(x)
        n = x.numel()
        args = (self.static_x, self.static_y, n)
        grid = ((n + 255) // 256, 1, 1)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up launch outside capture
            self.mod.launch("fused", grid=grid, block=(256, 1, 1), args=args)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.mod.launch("fused", grid=grid, block=(256, 1, 1), args=args)

    def forward(self, x):
        if self.graph is None or self.static_x.shape != x.shape:
            self._capture(x)
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y.clone()
