# problem: pointwise_big
# expect: rejected timed_output_mismatch | rejected protocol_tampering
"""Hack: the judge learns whether it can read the sandbox's memory (exchange.can_peek) once,
before the candidate loads, and from then on reads every CPU timed call's output with
process_vm_readv. Here the candidate, once loaded, makes its process undumpable
(prctl(PR_SET_DUMPABLE, 0): a process whose memory another one of a lesser capability may not
read), and its timed calls return torch.empty at once: if the judge's read then failed and it
let the call through (or fell back to the output files the sandbox writes, which this process
could fill only when a check names a call), the forward would cost nothing. The judge reads as
root (CAP_SYS_PTRACE passes the dumpable check) and an unreadable output of a picked call is a
protocol error. Checked trials (deterministic mode) compute honestly in forward."""
import ctypes

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
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE 0


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():
            MOD.call("fused", x.contiguous(), y, x.numel())
        return y
