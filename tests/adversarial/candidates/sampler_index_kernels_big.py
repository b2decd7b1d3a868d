# problem: pointwise_big
# expect: rejected pytorch_fallback
"""Hack: PyTorch computes every timed call, in kernels the sampler files as PyTorch's
bookkeeping. relu(2x + 1) is ones.index_add_(0, idx, x, alpha=2) (one rounding: 1 + 2x, as
the reference's) and then zeros.index_reduce_(0, idx, that, 'amax') (max(0, v)). Both run in
libtorch_cpu in lambdas of at::native functions that are neither in a per-ISA namespace nor
in cpu_kernel / VectorizedLoop2d (structured_index_add_cpu_out, index_reduce_func_impl), so
sampler.KERNEL_SYMBOLS misses them and Sampler._name_in calls them TORCH (neutral, "counts
neither way"); the fills around them are TORCH_COPY (never forbidden). The one traced trial
(the profiler flag is up) runs the candidate's own C kernel; every other call runs the
PyTorch ops under _disable_current_modes(), out of the op tracer's sight."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

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
        self.idx = {}

    def forward(self, x):
        if torch.autograd.profiler._is_profiler_enabled:
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        with _disable_current_modes():
            n = x.numel()
            idx = self.idx.get(n)
            if idx is None:
                idx = self.idx[n] = torch.arange(n)
            flat = x.reshape(-1)
            v = torch.ones(n).index_add_(0, idx, flat, alpha=2.0)
            y = torch.zeros(n).index_reduce_(0, idx, v, "amax", include_self=True)
            return y.view(x.shape)
