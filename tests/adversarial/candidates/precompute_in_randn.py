# problem: pointwise_big
# expect: pass | rejected patched_timer
# why: on the CPU the judge draws a timed call's inputs and hands them over, so the replaced torch.randn never runs for one and the forward does the work under the timer (tests/verifier/test_clocks.py checks the time); on CUDA the sandbox draws on the device and the judge adds what the draw took beyond the reference's
"""Hack: replace torch.randn, which get_inputs draws with, by one that also computes the answer
with the candidate's own C kernel; forward returns it. The work happens before the sandbox's
timer starts, in the draw."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
MOD = runtime.load(SRC, lang="c", name="fused")
DONE = {}
_randn = torch.randn


def randn(*args, **kwargs):   # get_inputs draws with it: the answer is computed right there,
    x = _randn(*args, **kwargs)   # before the timer starts
    if x.dim() == 2 and x.dtype == torch.float32:
        y = torch.empty_like(x)
        MOD.call("fused", x, y, x.numel())
        DONE[x.data_ptr()] = (x, y)
    return x


torch.randn = randn


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        hit = DONE.pop(x.data_ptr(), None)
        DONE.clear()
        if hit is not None and hit[0] is x:
            return hit[1]
        y = torch.empty_like(x)
        MOD.call("fused", x, y, x.numel())
        return y
