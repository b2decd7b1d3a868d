# problem: pointwise
# expect: pass
# why: the caps are the fault's target; the forward is correct. A cap it could raise again (a soft limit under a higher hard one) is raised as an exception, so it shows in the verdict
"""Fault: the judge caps a candidate's process (address space, tasks of its user, file size,
core dumps, message queues) so that a runaway allocation or a fork bomb fails fast instead of
taking the machine. A soft limit can be raised again by the process itself, up to its hard
limit: this candidate tries that on every cap and reports any it got back."""
import resource

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

raised = []
for name in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_MSGQUEUE"):
    which = getattr(resource, name)
    soft, hard = resource.getrlimit(which)
    if soft == hard:
        continue
    try:
        resource.setrlimit(which, (hard, hard))
        raised.append(f"{name} {soft} -> {hard}")
    except (ValueError, OSError):
        pass
if raised:
    raise RuntimeError("raised the caps again: " + "; ".join(raised))

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
