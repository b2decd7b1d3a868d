# problem: pointwise
# expect: runtime_error crash
# timeout: 40
"""Fault: signal everything within reach: SIGKILL the judge (the parent) and its process group,
SIGSTOP pid 1, then kill(-1, SIGKILL), every other process this uid may signal (none, under a uid
of its own), and finally itself. The caller must print a verdict and the next job must still be judged."""
import os
import signal

ppid = os.getppid()
for attempt in (lambda: os.kill(ppid, signal.SIGKILL),
                lambda: os.killpg(os.getpgid(ppid), signal.SIGKILL),
                lambda: os.kill(1, signal.SIGSTOP),
                lambda: os.kill(-1, signal.SIGKILL)):
    try:
        attempt()
    except OSError:
        pass
os.kill(os.getpid(), signal.SIGKILL)   # kill(-1) spares the caller: end here as a crash
