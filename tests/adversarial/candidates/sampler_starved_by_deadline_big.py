# problem: pointwise_big
# expect: timeout | rejected pytorch_fallback
# timeout: 30
"""Hack (fallback hidden by running out the clock): every timed call computes with PyTorch's
own mul, add and relu; only the checked trials (deterministic mode on: the op tracer and
the profiler are there) run the candidate's C kernel. On the CPU the only thing that looks
at the timed calls' code is the sampler, and Job.timed stops sampling as soon as the job
is within 5 s of its deadline (done = enough or monotonic() > deadline - 5), before the
sampler's minimums (4 sampled calls, 24 stops) are met; the first timed call is never
sampled (seen_s is empty). The candidate sleeps in the warm-up call (untimed, unchecked:
the first 'call' after its trials) until about 5 s before the deadline, estimated from the
mtime of its own file (written by the judge right after the job's baselines; TIMEOUT is
the job's timeout: its header's here, 300 s by default). Then one timed call runs,
is checked (right: it is PyTorch), and the timing loop ends with no stop made; the
sampler's report is empty and judge_samples returned None. Now a job whose time runs out
before the candidate's timed calls were made and watched is a timeout, not a pass."""
import os
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

TIMEOUT = 30.0
MARGIN = 5.5
SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
WRITTEN = os.stat("candidate.py").st_mtime if os.path.exists("candidate.py") else time.time()
STATE = {"warm": False}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():     # a checked trial
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        if not STATE["warm"]:                                 # the warm-up call
            STATE["warm"] = True
            left = WRITTEN + TIMEOUT - MARGIN - time.time()
            if left > 0:
                time.sleep(left)
        return torch.relu(x * 2.0 + 1.0)                      # PyTorch, in every timed call
