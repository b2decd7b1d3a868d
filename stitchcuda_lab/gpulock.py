"""One GPU shared by several processes: timed work has it alone, and memory is given back.

Memory: the caller, the judge and a candidate's process share one GPU, and a problem of tens
of GB fits only once, so each gives back what PyTorch's allocator keeps cached before the
next one needs it (``release_cached_memory``).

Time: with ``bench --jobs N`` several problems share one GPU at once.

Most of a problem's time is spent off the GPU (starting processes, tracing the graph,
planning, writing and building kernels, torch.compile's code generation), so problems can
overlap there. What touches the GPU takes a lock file (``Settings.gpu_lock``):

- ``exclusive``: everything a number comes from, and everything a candidate's process runs
  (the judge holds it from handing over the candidate until that process is gone, so a
  candidate can never run beside another problem's timing);
- ``shared``: trusted GPU work that is not timed (validating a problem, tracing its graph,
  the reference's outputs, torch.compile's first call), which may overlap each other but
  never a timing.

Without a lock file (the default: one problem per GPU) both are no-ops. Locks are
``flock``s, released by the kernel when a process dies, so a killed problem never wedges the
others. Nested use in one process keeps the strongest lock already held.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

_held: dict[str, list[int]] = {}     # path -> [fd, depth, mode]


@contextlib.contextmanager
def exclusive(path: str | None, first: bool = False) -> Iterator[None]:
    with _lock(path, fcntl.LOCK_EX, first):
        yield


@contextlib.contextmanager
def shared(path: str | None, first: bool = False) -> Iterator[None]:
    with _lock(path, fcntl.LOCK_SH, first):
        yield


@contextlib.contextmanager
def _lock(path: str | None, mode: int, first: bool = False) -> Iterator[None]:
    if not path:
        yield
        return
    entry = _held.get(path)
    if entry is not None:
        fd, depth, held = entry
        upgrade = held == fcntl.LOCK_SH and mode == fcntl.LOCK_EX
        if upgrade:
            fcntl.flock(fd, fcntl.LOCK_EX)   # not atomic: others' shared work may run between
        entry[1:] = [depth + 1, fcntl.LOCK_EX if upgrade else held]
        try:
            yield
        finally:
            entry[1] -= 1
            if upgrade:
                fcntl.flock(fd, fcntl.LOCK_SH)
                entry[2] = fcntl.LOCK_SH
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        with _queue(path, first):
            fcntl.flock(fd, mode)
        _held[path] = [fd, 1, mode]
        yield
    finally:
        _held.pop(path, None)
        os.close(fd)   # closing the descriptor releases the lock


@contextlib.contextmanager
def _queue(path: str, first: bool = False) -> Iterator[None]:
    """Taking the lock goes through a second lock file, held by one waiter at a time: a
    timing that waits holds it, so shared work that comes later waits behind the timing.
    ``flock`` alone grants a shared lock whenever no exclusive one is held, also while a
    timing waits, so on a GPU where one problem after another compiles its baselines (each
    first call of torch.compile holds the shared lock for up to 90 s) a candidate's timing
    waited about 40 s for a GPU that was never free of shared work. An upgrade skips the
    queue: its holder already shares the lock, and a timing queued before it waits for that
    share to end (a deadlock, had the upgrade waited for the queue). For the same reason a
    process that holds a share must never wait on another process's fresh shared lock (none
    does: the bench's early baseline does not wait, and the judge takes timings alone)."""
    # work towards a problem's first verdict (its baselines, its first candidates: ``first``)
    # is served before a later iteration's: with ``bench --jobs 8`` and a budget the GPU
    # could not meet, the largest problems timed out waiting to time their baselines behind
    # other problems' refine rounds. Such a waiter holds a shared lock on a third file until
    # it has the GPU's lock; any other waiter that gets the queue while one does lets the
    # queue go and waits for the third file to be free (``flock`` wakes its waiters in no
    # order, so the queue alone serves whoever it wakes)
    gate = os.open(path + ".first", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fd = os.open(path + ".queue", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if first:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            while True:
                fcntl.flock(gate, fcntl.LOCK_EX)   # no first waiter now
                fcntl.flock(gate, fcntl.LOCK_UN)
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:   # and still none, now that the queue is this waiter's
                    fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fcntl.flock(fd, fcntl.LOCK_UN)   # one came meanwhile: the queue is its
                    continue
                fcntl.flock(gate, fcntl.LOCK_UN)
                break
        yield
    finally:
        os.close(fd)
        os.close(gate)


def release_cached_memory(device: str) -> None:
    """Return the memory PyTorch's caching allocator holds unused to the device."""
    if device.startswith("cuda"):
        import gc

        import torch
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
