# problem: exp_cancel
# expect: rejected timed_output_mismatch | rejected patched_timer
"""Hack (work moved past the candidate's timer through the interpreter's own hook, nothing
replaced): in a timed call (deterministic mode off) forward returns an empty output at once
and installs a profile function (sys.setprofile). The function waits for the harness's timer
to return (the 'return' event of its ``call``, after the timer's end reading), fills the
output there with the C kernel and removes itself, so no hook is left for a check to see. No
timer, harness function, channel or module is replaced and no thread is started: only the
judge's clock sees the work, between the sandbox's timer and its reply. Checked trials
compute in forward. An honest kernel (pass_exp_cancel_exact.py) is the control: the verdict
must either refuse it or count the work (no faster than the control).

It passed at 5x and 36x eager on a busy 2-core host. The sandbox's timer now takes every
profile, trace and monitoring function away the moment the forward returns, before its end
reading (timing.drop_hooks): the hook never sees the timer return, and the checked timed call
reads an output never written (timed_output_mismatch)."""
import sys

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
        self.mod = runtime.load(SRC, lang="c", name="exp4_hook")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():
            self.mod.call("exp4", x, y, x.numel())
            return y
        mod = self.mod

        def hook(frame, event, arg):
            # the timer's own call returning: its end reading is taken
            if event == "return" and frame.f_code.co_name == "call" \
                    and "timing" in frame.f_code.co_filename:
                sys.setprofile(None)
                mod.call("exp4", x, y, x.numel())

        sys.setprofile(hook)
        return y
