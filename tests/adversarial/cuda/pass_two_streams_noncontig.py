# problem: pointwise
# expect: pass
"""Legit: the two halves of the rows computed on two side streams, both joined back to the
current stream (wait_stream) before returning; the kernel writes a (cols, rows) buffer and the
output is its transpose, a non-contiguous tensor."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused_t(const float* x, float* yt, long long r0, long long r1,
                                   long long rows, long long cols) {
    long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long i = r0 + k / cols, j = k % cols;
    if (i < r1) { float v = 2.0f * x[i * cols + j] + 1.0f; yt[j * rows + i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused_t")
        self.streams = None

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        yt = torch.empty(cols, rows, device=x.device)
        if self.streams is None:
            self.streams = (torch.cuda.Stream(), torch.cuda.Stream())
        cur = torch.cuda.current_stream()
        half = rows // 2
        for s, (r0, r1) in zip(self.streams, ((0, half), (half, rows))):
            s.wait_stream(cur)
            with torch.cuda.stream(s):
                n = (r1 - r0) * cols
                self.mod.launch("fused_t", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                                args=(x, yt, r0, r1, rows, cols))
        for s in self.streams:
            cur.wait_stream(s)
        return yt.t()
