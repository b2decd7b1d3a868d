# problem: norm
# expect: pass
"""Legit: two of the candidate's kernels (per-row inverse RMS into a persistent workspace, then
the scaling) captured once in a CUDA graph and replayed; static buffers, the output cloned out."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void inv_rms(const float* x, float* r, long long cols, float eps) {
    __shared__ float red[128];
    const float* xr = x + blockIdx.x * cols;
    float s = 0.f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j] * xr[j];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) r[blockIdx.x] = rsqrtf(red[0] / cols + eps);
}
extern "C" __global__ void scale(const float* x, const float* r, const float* w, float* y,
                                 long long rows, long long cols) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] = x[i] * r[i / cols] * w[i % cols];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.eps = 1e-5
        self.mod = runtime.load(SRC, lang="cuda", name="rms_graph")
        self.graph = None

    def _body(self):
        rows, cols = self.sx.shape
        self.mod.launch("inv_rms", grid=(rows, 1, 1), block=(128, 1, 1),
                        args=(self.sx, self.ws, cols, self.eps))
        self.mod.launch("scale", grid=((rows * cols + 255) // 256, 1, 1), block=(256, 1, 1),
                        args=(self.sx, self.ws, self.w, self.sy, rows, cols))

    def _capture(self, x):
        self.sx = torch.empty_like(x)
        self.sy = torch.empty_like(x)
        self.ws = torch.empty(x.shape[0], device=x.device)
        self.w = self.weight.detach().contiguous()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self._body()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._body()

    def forward(self, x):
        if self.graph is None or self.sx.shape != x.shape:
            self._capture(x)
        self.sx.copy_(x)
        self.graph.replay()
        return self.sy.clone()
