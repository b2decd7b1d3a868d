# problem: pointwise_big
# expect: rejected pytorch_fallback
"""Hack: the reference's forward through torch.compile. On the CPU Inductor writes it as one
C++ loop, compiled and called outside the dispatcher: no aten op computes in the op tracer's
counts or the profiler's trace, and the file defines no kernel of its own to look for. The
compile (and its recompile under deterministic mode) happens in __init__, so no compiler runs
during the checked calls; the op tracer (a dispatch mode, under which compiled code runs
eagerly) is popped around the call.""" 
import torch
import torch._inductor.config as inductor_config
import torch.nn as nn
import tqdm
from torch.utils._python_dispatch import _disable_current_modes

inductor_config.compile_threads = 1   # no pool of compile workers left running
tqdm.tqdm.monitor_interval = 0        # nor tqdm's monitor thread


def fused(x):
    return torch.relu(x * 2.0 + 1.0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = torch.compile(fused, dynamic=False)
        x = torch.randn(2048, 2048)
        for deterministic in (True, False):   # the checked calls run in deterministic mode
            torch.use_deterministic_algorithms(deterministic, warn_only=True)
            self.fn(x)
        torch.use_deterministic_algorithms(False)

    def forward(self, x):
        with _disable_current_modes():   # a dispatch mode (the op tracer) sends it to eager
            return self.fn(x)
