# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: 2x + 1 is a GEMM with one column (x as an (n, 1) matrix times [[2]], plus a bias of 1),
so PyTorch computes it with addmm, declared in KEPT_OPS; the candidate's own C kernel does only
the ReLU. (A 1x1 convolution says the same, but the profiler shows the thnn_conv2d below it,
which is not a library name.) The
verifier lets a file keep any library op KEPT_OPS names (verify.Job.claims keeps the
library ones; find_fallback allows LIBRARY for files), with no test that the reference runs
that op or that the op is how the reference computes: on a problem with no GEMM or
convolution at all, the pointwise work moves to PyTorch under the name of a kept library op.
kept_ops_compute.py (KEPT_OPS = mul) is caught; this is the same fallback spelled as a
library op."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["addmm"]

SRC = r"""
#include <stdint.h>
void relu_(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="relu_")
        self.register_buffer("w", torch.full((1, 1), 2.0))
        self.register_buffer("b", torch.full((1,), 1.0))

    def forward(self, x):
        y = torch.addmm(self.b, x.reshape(-1, 1), self.w).reshape(x.shape).contiguous()
        self.mod.call("relu_", y, y.numel())
        return y
