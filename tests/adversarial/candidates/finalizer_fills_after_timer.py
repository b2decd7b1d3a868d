# problem: exp_cancel
# expect: rejected timed_output_mismatch | rejected patched_timer
"""Hack (work moved past the candidate's timer by the harness itself, nothing patched): in a
timed call (deterministic mode off) forward returns an empty output at once and keeps (x, y)
aside; the output of the previous timed call carries a weakref.finalize callback that fills the
pending output with the C kernel. The sandbox drops the previous call's outputs itself, after
its timer has stopped and before it replies (Harness.call: ``self.last_call = kept``), so the
output is complete when the judge reads it out of the process and every check of its values
passes, while the timer the sandbox reports saw only an allocation. No timer, harness function,
channel or module is replaced (timing.tampered() and every patch check see nothing), no thread
or process is started: only the judge's clock sees the work, and on the CPU it forgives
2 ms plus half the calibrated path per call, with the quietest call believed over the report
only beyond the path's spread (0.5 ms or more). Checked trials, and the first timed call after
them (no earlier output left to die), compute in forward. An honest kernel
(pass_exp_cancel_exact.py) is the control; a verdict faster than it is unearned.

It passed at up to 8.5x eager (the control 0.31x) while the harness let outputs go after the
timer. Now the CPU harness lets a call's outputs go only at the ``prepare`` before the call
after next, outside the judge's clock, with the collector of reference cycles off for the call:
the finalizer fills the output after the judge has read it, and the checked timed call reads
zeros (timed_output_mismatch)."""
import weakref

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <stdint.h>
void exp4(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = expf(4.0f * x[i]);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="exp4_exact")
        self.pending = None      # (x, y) of a timed call, filled when the last output dies
        self.last = None         # weak reference to the last timed call's output

    def _fill(self):
        p, self.pending = self.pending, None
        if p is not None:
            self.mod.call("exp4", p[0], p[1], p[0].numel())

    def forward(self, x):
        self._fill()
        x = x.contiguous()
        y = torch.empty_like(x)
        timed = not torch.are_deterministic_algorithms_enabled()
        armed = self.last is not None and self.last() is not None
        if timed and armed:
            self.pending = (x, y)    # filled by the previous output's finalizer
        else:
            self.mod.call("exp4", x, y, x.numel())
        if timed:
            weakref.finalize(y, self._fill)
            self.last = weakref.ref(y)
        return y
