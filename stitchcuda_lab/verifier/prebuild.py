"""Several candidates' kernels compiled at once, before any of them is judged.

An iteration with several candidates (``--candidates K``, the offline coder's variants) spends
most of its verification time compiling. Here every candidate imports in a throwaway sandbox
of its own, side by side, and the judge serves their build requests as they come (in the
kernel cache, as for any job); then every one of those processes is destroyed, and each
candidate is judged alone from a fresh process as ever (``verify.run_verify``), its builds now
hits in the cache.

Nothing of this phase reaches a verdict: its processes are gone before the first timing (on
the GPU their contexts, and whatever they queued, with them), and what it leaves behind, the
cache, holds only what the judge compiled itself. A candidate that never finishes importing
is cut off (its own verification meets the same hang, and says so).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any

from .. import gpulock
from .options import VerifyOptions
from .pool import kill_user
from .verify import Failed, Job, Reject, WorkerState

WIDTH = 4              # sandboxes importing at once, at most (and at most one per core)
LIMIT_S = 120.0        # the phase's own time limit (each candidate's timeout still applies)
STRAGGLER_S = 10.0     # after the others are done, the slowest gets at least this much more
JOIN_S = 30.0          # for a cut-off import's thread to see its process gone


def run_prebuild(job: dict, state: WorkerState) -> dict:
    """``{"prebuilt": [{"loaded": bool, "build_ms" | "failure": ...}, ...]}`` in job order."""
    sources: list[str] = list(job["candidate_sources"])
    opts = VerifyOptions(**job["options"])
    limit = min(float(job.get("timeout", LIMIT_S)), LIMIT_S)
    width = max(1, min(WIDTH, os.cpu_count() or 1, len(sources)))
    results: list[dict[str, Any]] = [{} for _ in sources]
    # candidate code runs here: the GPU is this job's alone, as for any verification
    with gpulock.exclusive(opts.gpu_lock, first=opts.first):
        for start in range(0, len(sources), width):
            batch = range(start, min(start + width, len(sources)))
            _import_side_by_side(job, state, {i: sources[i] for i in batch}, limit, results)
    if state.pool is not None:
        state.pool.fill()
    return {"prebuilt": results, "healthy": True}


def _import_side_by_side(job: dict, state: WorkerState, sources: dict[int, str], limit: float,
                         results: list[dict[str, Any]]) -> None:
    deadline = time.monotonic() + limit
    jobs: dict[int, Job] = {}
    threads: dict[int, threading.Thread] = {}
    try:
        for i, source in sources.items():
            jobs[i] = Job(dict(job, candidate_source=source), state, deadline)
            jobs[i].box = state.sandbox()
        for i, j in jobs.items():
            threads[i] = threading.Thread(target=_import, args=(j, results[i]), daemon=True)
            threads[i].start()
        _wait(threads, results, deadline)
    finally:
        for j in jobs.values():     # first stop everything a straggler runs: its process, and
            if j.box is None:       # a compiler building for it (its user + 1), so that
                continue            # nothing of this phase goes on beside the timings after it
            with contextlib.suppress(OSError):   # the thread still asking sees the pipe close
                os.kill(j.box.proc.pid, signal.SIGKILL)
            if j.box.uid is not None:
                kill_user(j.box.uid + 1)
        for i, j in jobs.items():
            if i in threads:
                threads[i].join(JOIN_S)
            if j.box is not None:
                j.box.destroy()
            results[i].setdefault("loaded", False)
            results[i].setdefault("failure", "cut off: still importing at the phase's end")


def _import(j: Job, out: dict[str, Any]) -> None:
    try:
        j.open(j.sandbox)
        t0 = time.perf_counter()
        j.ask({"op": "candidate"})
        out.update(loaded=True, build_ms=(time.perf_counter() - t0) * 1e3)
    except Reject as r:
        out.update(loaded=False, failure=f"rejected: {r.name}")
    except Failed as f:
        out.update(loaded=False, failure=f"{f.status}: {f.name}")
    except Exception as e:  # noqa: BLE001  (the candidate's verification will say what it is)
        out.update(loaded=False, failure=f"{type(e).__name__}: {e}")


def _wait(threads: dict[int, threading.Thread], results: list[dict[str, Any]],
          deadline: float) -> None:
    """Until every import ends, or the deadline; once one has loaded, a straggler gets
    ``STRAGGLER_S`` or twice the time that took, whichever is more, and no longer (a failure
    ending early does not start that clock). A straggler cut off is only built later, in its
    own verification."""
    t0 = time.monotonic()
    cut = deadline
    while any(t.is_alive() for t in threads.values()) and time.monotonic() < cut:
        if cut == deadline and any(not t.is_alive() and results[i].get("loaded")
                                   for i, t in threads.items()):
            cut = min(deadline, time.monotonic() + max(STRAGGLER_S, 2 * (time.monotonic() - t0)))
        time.sleep(0.02)
