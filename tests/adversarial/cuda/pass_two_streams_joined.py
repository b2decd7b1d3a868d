# problem: pointwise
# expect: pass
"""Legit: two halves on two streams, both joined back to the current stream before returning."""
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
        shape = x.shape
        x = x.contiguous().view(-1)  # flat, so the halves are element ranges, not rows
        y = torch.empty_like(x)
        n = x.numel()
        half = n // 2
        cur = torch.cuda.current_stream()
        self.side.wait_stream(cur)  # x and y are ready for the side stream
        with torch.cuda.stream(self.side):
            self.mod.launch("fused", grid=((n - half + 255) // 256, 1, 1), block=(256, 1, 1),
                            args=(x[half:], y[half:], n - half))
        self.mod.launch("fused", grid=((half + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(x, y, half))
        cur.wait_stream(self.side)  # join
        y.record_stream(self.side)
        return y.view(shape)
