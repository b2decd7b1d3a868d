"""Problems sharing a GPU: a timing holds the lock alone; untimed work only shares it."""

from __future__ import annotations

import subprocess
import sys
import time

from stitchcuda_lab import gpulock

HOLD = '''
import sys, time
from stitchcuda_lab import gpulock
with getattr(gpulock, sys.argv[2])(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
'''


def _holder(path, mode: str, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode, str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def _wait_for(path, mode: str) -> float:
    t0 = time.monotonic()
    with getattr(gpulock, mode)(str(path)):
        return time.monotonic() - t0


def test_a_timing_waits_for_shared_work_and_shared_work_overlaps(tmp_path):
    lock = tmp_path / "gpu.lock"
    other = _holder(lock, "shared", 1.5)
    assert _wait_for(lock, "shared") < 0.5          # untimed GPU work overlaps
    assert _wait_for(lock, "exclusive") > 0.8       # a timing waits for it to end
    other.wait()
    other = _holder(lock, "exclusive", 1.5)
    assert _wait_for(lock, "shared") > 0.8          # nothing runs beside a timing
    other.wait()


def test_shared_work_that_comes_after_a_waiting_timing_waits_behind_it(tmp_path):
    """A timing queued behind long shared work (a baseline's compile) is not passed by the
    shared work that arrives after it, or it would wait as long as any problem compiles."""
    lock = tmp_path / "gpu.lock"
    compiling = _holder(lock, "shared", 1.5)
    timing = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "exclusive", "1.0"],
                              stdout=subprocess.PIPE, text=True)
    time.sleep(0.4)                     # the timing now waits for the compile
    t0 = time.monotonic()
    with gpulock.shared(str(lock)):
        waited = time.monotonic() - t0
    compiling.wait()
    timing.wait()
    assert timing.stdout.read().strip() == "held"
    assert waited > 1.5                 # the rest of the compile, then the whole timing


def test_a_killed_holder_releases_the_lock(tmp_path):
    lock = tmp_path / "gpu.lock"
    other = _holder(lock, "exclusive", 60)
    other.kill()
    other.wait()
    assert _wait_for(lock, "exclusive") < 0.5


def test_nested_use_keeps_the_strongest_lock_and_no_lock_file_is_a_no_op(tmp_path):
    lock = str(tmp_path / "gpu.lock")
    with gpulock.shared(lock):
        with gpulock.exclusive(lock):      # upgraded in place, not a second lock (deadlock)
            with gpulock.shared(lock):
                pass
            probe = subprocess.run([sys.executable, "-c", (
                "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
                "try:\n    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB); print('free')\n"
                "except BlockingIOError:\n    print('busy')"), lock],
                capture_output=True, text=True)
            assert probe.stdout.strip() == "busy"
    with gpulock.exclusive(""), gpulock.shared(None):
        pass


FIRST = '''
import sys, time
from stitchcuda_lab import gpulock
with gpulock.exclusive(sys.argv[1], first=sys.argv[2] == "first"):
    print(time.time(), flush=True)
    time.sleep(0.3)
'''


def test_work_towards_a_first_verdict_is_served_before_later_iterations(tmp_path):
    """Three refine-round jobs wait behind a timing; a problem's first job comes after them
    and gets the GPU next (after the one already holding the queue), not last: the largest
    problems of a bench timed out waiting to time their baselines behind refine rounds."""
    lock = tmp_path / "gpu.lock"
    holder = _holder(lock, "exclusive", 1.5)
    waiters = {}
    for name in ("later1", "later2", "later3", "first"):
        waiters[name] = subprocess.Popen(
            [sys.executable, "-c", FIRST, str(lock), "first" if name == "first" else "later"],
            stdout=subprocess.PIPE, text=True)
        time.sleep(0.25)
    holder.wait()
    got = {name: float(p.communicate(timeout=30)[0]) for name, p in waiters.items()}
    order = sorted(got, key=got.get)
    assert order.index("first") <= 1, order   # at most the one that held the queue before it
