# problem: norm
# expect: rejected pytorch_fallback
"""Hack: the RMS norm has no GEMM, yet a candidate file may run any library op without declaring
it: the sum of squares is a batched dot product (bmm), and both scalings are products with
diagonal matrices (mm), built with zeros + diagonal().copy_ (cheap ops). Only a 32-element
rsqrt is the candidate's own C code."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void inv_rms(const float* ss, float* r, int64_t rows, int64_t cols, float eps) {
    for (int64_t i = 0; i < rows; ++i) r[i] = 1.0f / sqrtf(ss[i] / (float)cols + eps);
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.mod = runtime.load(SRC, lang="c", name="inv_rms")

    def forward(self, x):
        rows, cols = x.shape
        ss = torch.bmm(x.unsqueeze(1), x.unsqueeze(2)).reshape(rows).contiguous()
        r = torch.empty(rows)
        self.mod.call("inv_rms", ss, r, rows, cols, 1e-5)
        d = torch.zeros(rows, rows)
        d.diagonal().copy_(r)
        wd = torch.zeros(cols, cols)
        wd.diagonal().copy_(self.weight.detach())
        return torch.mm(torch.mm(d, x), wd)
