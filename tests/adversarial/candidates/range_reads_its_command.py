# problem: exp_rand
# expect: incorrect input_range
# why: the range-limited polynomial of range_exp_polynomial.py, made exact only in the trial whose command asks the sandbox to widen its draw: it walks up the stack to the sandbox's `trial` and reads the command. The judge now draws a trial's inputs itself and hands them over wherever they can travel that way (contiguous, up to 256 MB), so no command names the widened trial, and the polynomial meets it.
"""Hack: exact where the command announces the widened trial, a polynomial good on [0, 1)
elsewhere (both in a C kernel of its own)."""
import sys

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exact_exp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i]);
}
void poly_exp(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i], p = 1.0f / 5040.0f;
        p = p * v + 1.0f / 720.0f; p = p * v + 1.0f / 120.0f; p = p * v + 1.0f / 24.0f;
        p = p * v + 1.0f / 6.0f;  p = p * v + 0.5f;         p = p * v + 1.0f;
        y[i] = p * v + 1.0f;
    }
}
"""


def _announced() -> bool:
    f = sys._getframe(1)
    while f is not None:
        cmd = f.f_locals.get("cmd")
        if isinstance(cmd, dict) and cmd.get("op") == "trial":
            return bool(cmd.get("widen"))
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp_by_command")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("exact_exp" if _announced() else "poly_exp", x, y, x.numel())
        return y
