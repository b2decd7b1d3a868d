# problem: pointwise
# expect: runtime_error
"""Fault against the jobs after this one: two chains of processes that hop to a new pid (each
forks its successor and exits), in sessions of their own, writing a heartbeat file in /tmp.
The sandbox's teardown found a candidate's processes by scanning /proc for its user and killed
the pids it found, three rounds 50 ms apart: while it ran, the chains hopped every fraction of
a millisecond, so every pid it found was gone when its kill came, and they lived on beside
the candidates after it (taking their CPU while they were timed, or computing for a later
candidate out of its sampler's sight). The candidate ends its own job at once (from
__init__), once the chains hop fast. The teardown now kills the user's every process at once
(kill(-1) as that user) until none is left; tests/adversarial/test_leftovers.py checks that
no heartbeat comes after the verdict. The chains end by themselves after 20 s."""
import os
import sys
import time

import torch
import torch.nn as nn

HEARTBEAT = "/tmp/.stitch_chain_heartbeat"
FLAG = os.path.abspath("hop_fast")
HOP = r'''
import os, sys, time
end = time.time() + 20.0
beat, fast_until = 0.0, None
while time.time() < end:
    now = time.time()
    if fast_until is None and os.path.exists(sys.argv[2]):
        fast_until = now + 0.5          # the judge's teardown is about to run: hop fast
    if now - beat > 0.05:
        beat = now
        try:
            with open(sys.argv[1], "a") as f:
                f.write("%d %.3f\n" % (os.getpid(), now))
        except OSError:
            pass
    if fast_until is not None and now < fast_until:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0003:
            pass
    else:
        time.sleep(0.005)
    while True:
        try:
            pid = os.fork()
            break
        except OSError:
            time.sleep(0.001)
    if pid:
        os._exit(0)
'''


def _start():
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                for fd in range(3, 1024):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                os.execv(sys.executable, [sys.executable, "-S", "-c", HOP, HEARTBEAT, FLAG])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for _ in range(2):
            _start()
        time.sleep(0.3)
        open(FLAG, "w").close()
        time.sleep(0.02)
        raise RuntimeError("ending the job now, with the chains hopping")

    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)
