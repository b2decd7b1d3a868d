# problem: pointwise
# expect: rejected subprocess
"""Fault: the first forward leaves 32 detached processes behind (each setsid, double-forked,
ignoring SIGTERM and SIGHUP, closing the protocol pipes); the job must still end, reject it,
and leave none of them running afterwards."""
import os
import signal
import time

import torch
import torch.nn as nn

STARTED = []


def _swarm(n):
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                    signal.signal(signal.SIGHUP, signal.SIG_IGN)
                    for fd in range(3, 256):
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                    time.sleep(300)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        STARTED.append(pid)


class ModelNew(nn.Module):
    def forward(self, x):
        if not STARTED:
            _swarm(32)
        return _own(x)


def _own(x):
    y = torch.empty_like(x)
    flat_x, flat_y = x.contiguous().view(-1), y.view(-1)
    vals = [max(2.0 * v + 1.0, 0.0) for v in flat_x.tolist()]
    flat_y.copy_(torch.tensor(vals, dtype=torch.float32))
    return y
