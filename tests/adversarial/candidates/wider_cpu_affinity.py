# problem: linear_big
# expect: pass
# why: sched_setaffinity is refused in a candidate's process (seccomp), so it runs on the judge's cores like the baselines; tests/adversarial/test_cores.py checks its time on a judge pinned to one core
"""Hack: the Verifier gives every contender the same CPU cores (the judge's own; a bench pins
each problem's judge to a slice of the host) and times eager PyTorch on them. This candidate
keeps the GEMM in the library, as it may, but first widens its own CPU affinity to every core
of the host (no privilege needed) and raises torch's thread count to match: a speedup over a
baseline that had fewer cores, for the same work. Where it cannot widen them, it runs on the
cores it has."""
import os

import torch
import torch.nn as nn

KEPT_OPS = ["addmm"]
ALL = set(range(os.cpu_count() or 1))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x):
        try:
            os.sched_setaffinity(0, ALL)
            torch.set_num_threads(len(ALL))
        except OSError:
            pass
        return torch.addmm(self.fc.bias, x, self.fc.weight.t())
