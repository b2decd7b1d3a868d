# problem: pointwise
# expect: runtime_error crash | timeout
# timeout: 30
"""Fault: a detached grandchild keeps the sandbox's protocol pipes open (so the judge sees no
end of file), then the sandbox exits in the middle of a trial; the judge must not hang past the
job's limit. It waited out the whole limit (30 s) until the judge asked, while no message came,
whether the sandbox still ran (channel.recv's ``alive``): now it says crash at once."""
import os
import time

import torch.nn as nn

pid = os.fork()
if pid == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            time.sleep(40)
    finally:
        os._exit(0)
os.waitpid(pid, 0)


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(7)
