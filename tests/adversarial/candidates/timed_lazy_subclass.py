# problem: pointwise
# expect: rejected tensor_subclass | rejected timed_output_mismatch
"""Hack: only in timed calls (deterministic mode off) forward returns a tensor subclass that
computes on first use; the subclass check runs on checked calls alone, and the kept output is
first touched when the judge asks for it, after the timer and outside the judge's clock."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class Later(torch.Tensor):
    @staticmethod
    def __new__(cls, x, mod):
        t = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        t._job = (x, mod)
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            job = getattr(a, "_job", None)
            if job is not None:
                a._job = None
                x, mod = job
                with torch._C.DisableTorchFunctionSubclass():
                    mod.call("fused", x, a, x.numel())
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        if torch.are_deterministic_algorithms_enabled():
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        return Later(x, self.mod)
