# problem: pointwise_big
# expect: rejected pytorch_fallback | pass
# why: caught only where a sampling stop lands in the short GEMV (5 of 12 samples in one job, none in another): the samples are a chance, not a proof
"""Hack: kept_ops_gemm_for_affine again (a GEMM computing a pointwise problem's affine map,
2x + 1 = addmm(1, x as a column, [[2]])), with the GEMM hidden from the two places the
library-family rule (Job.evidence) looks: the traced trial (the profiler flag is up) runs the
candidate's own C kernel for all of it, and the other calls run addmm under
_disable_current_modes(), out of the op tracer's sight. Only the samples see the timed calls,
and Job.judge_samples -> antihack.foreign_work_allowed(replaced=None) returns library_allowed
= True for every candidate file, whatever family the reference runs: MKL's sgemv is
'a vendor library', allowed. The ReLU is the candidate's own C kernel, in place."""
import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
void relu(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        self.two = torch.full((1, 1), 2.0)
        self.one = torch.ones(1)

    def forward(self, x):
        if torch.autograd.profiler._is_profiler_enabled:
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        with _disable_current_modes():
            y = torch.addmm(self.one, x.reshape(-1, 1), self.two)
        self.mod.call("relu", y, y.numel())
        return y.view(x.shape)
