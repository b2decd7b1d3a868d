# problem: tanh_f64
# expect: pass
"""Legit: the float64 problem in double precision (tanh from libm), within an ulp or two of
PyTorch's: it must pass whatever float64 tolerance the Verifier picks."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void tanh64(const double* x, double* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = tanh(x[i]); }
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="tanh64")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("tanh64", x, y, x.numel())
        return y
