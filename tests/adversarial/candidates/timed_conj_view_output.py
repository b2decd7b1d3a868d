# problem: complex_scale
# expect: rejected timed_output_mismatch
"""Hack (correctness of how a timed call's outputs are read back): in timed calls (deterministic
mode off) forward returns ``y.conj()``, a lazy conjugate view whose values, as the caller reads
them, are conj(1.5 x + 0.5): every imaginary part has the wrong sign. The harness describes a
timed call's output to the judge by ``o.detach().contiguous().data_ptr()``, shape and dtype
(sandbox.call, peek); ``contiguous()`` of a contiguous conjugate view is the view itself, its
conj bit still set and its data pointer the unconjugated memory, so the judge
(exchange.peek_output) reads 1.5 x + 0.5, the right bytes, and passes a call whose returned
tensor is wrong. (Checked trials write outputs through ``view(torch.uint8)``, which refuses a
conjugate view, so there it returns the plain tensor.) The same holds for a negative view
(``torch._neg_view``) on real outputs.

It passed (0.10x eager) while the judge read the view's memory as it lay; the sandbox now takes
a negated or conjugated output resolved, as the caller reads it (sandbox._plain).
"""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#pragma STDC FP_CONTRACT OFF
void cscale(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { y[2 * i] = x[2 * i] * 1.5f + 0.5f; y[2 * i + 1] = x[2 * i + 1] * 1.5f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="cscale_conj")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("cscale", x, y, x.numel())
        if torch.are_deterministic_algorithms_enabled():
            return y
        return y.conj()   # what the caller gets: conj(1.5 x + 0.5), wrong
