"""Timing a forward the way the Verification protocol says; the same code times every contender.

``Timer.call`` is the protocol for one call: an L2 flush, then the call between a start event and
an end event recorded after a device-wide synchronize (CUDA), or between perf_counter readings
(CPU). Every timed call gets inputs of its own, drawn from a fresh seed just before it (so no
call reuses another's inputs, and nothing can be computed ahead). On CUDA the flush comes after
the drawing, inside ``call``, so the inputs are cold (a 256 MB write takes a steady 0.1 ms). On
the CPU the flush (a buffer twice the last-level cache: tens of milliseconds, varying with the
machine's load) comes before the inputs are drawn (``flush``), so the judge's clock around a
call holds only the drawing and the call; the inputs are then warm, for every contender alike. The judge runs it on the reference (eager, torch.compile) in
its own process and the sandbox runs it on the candidate; the judge's own clock around each of
the sandbox's calls bounds what the sandbox reports (verify.py), so a candidate that replaces a
timer gains nothing. ``capture()`` / ``tampered()`` still name a replaced timer in the sandbox,
as the first and plainest evidence.

CUDA: a 256 MB write flushes the 50 MB L2. CPU: a buffer twice the last-level cache.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

_ORIG: dict[str, tuple[Any, str, Any]] = {}
L2_FLUSH_BYTES = 256 * 1024 * 1024
TIME_BUDGET_MS = 100.0   # CUDA: timed trials fill about this much wall time ...
MAX_TRIALS = 400         # ... up to this many


def _targets():
    import torch
    return [(time, "time.", "perf_counter"), (time, "time.", "perf_counter_ns"),
            (time, "time.", "time"), (time, "time.", "monotonic"),
            (torch.cuda, "torch.cuda.", "synchronize"), (torch.cuda, "torch.cuda.", "Event"),
            (torch.cuda.Event, "torch.cuda.Event.", "record"),
            (torch.cuda.Event, "torch.cuda.Event.", "elapsed_time"),
            (torch.cuda.Event, "torch.cuda.Event.", "synchronize"),
            (torch.cuda.Stream, "torch.cuda.Stream.", "synchronize"),
            (torch.cuda, "torch.cuda.", "current_stream"),
            (torch, "torch.", "allclose"), (torch, "torch.", "isclose"),
            (torch, "torch.", "equal"), (sys, "sys.", "setprofile"), (sys, "sys.", "settrace")]


_MONITOR_EVENTS = [] if not hasattr(sys, "monitoring") else [
    getattr(sys.monitoring.events, n) for n in dir(sys.monitoring.events)
    if n.isupper() and n != "NO_EVENTS"]


def drop_hooks() -> None:
    """No profile, trace or monitoring function left to run: called by the sandbox's timer
    the moment the candidate's forward returns, before its end reading. A profile function
    that the forward installs runs at every call and return of the harness after it: one that
    waited for the timer to return computed the outputs there, unseen by the timer, and took
    itself away (candidates/profile_hook_fills_after_timer.py). Whatever a hook does while
    these are called is still inside the timer."""
    _real("sys.setprofile")(None)
    _real("sys.settrace")(None)
    mon = getattr(sys, "monitoring", None)   # Python 3.12 on
    if mon is None:
        return
    # every tool id, in use or not: a tool freed after its callbacks were registered still
    # has them called (claimed here for the moment of clearing them). A callback that runs
    # while this clears and registers again on a tool already cleared is not seen
    # (docs/RELIABILITY.md)
    for tool in range(6):
        ours = mon.get_tool(tool) is None
        try:
            if ours:
                mon.use_tool_id(tool, "stitchcuda-lab sandbox")
            mon.set_events(tool, 0)
        except ValueError:
            pass
        for ev in _MONITOR_EVENTS:
            try:
                mon.register_callback(tool, ev, None)
            except ValueError:
                pass
        if ours and mon.get_tool(tool) == "stitchcuda-lab sandbox":
            mon.free_tool_id(tool)


def capture(extra: Sequence[tuple[Any, str, str]] = ()) -> None:
    """Remember the real timers, and the ``extra`` (owner, prefix, name) functions the caller
    wants watched too (once per process, before any candidate code runs)."""
    if _ORIG:
        return
    for owner, prefix, attr in _targets() + list(extra):
        _ORIG[prefix + attr] = (owner, attr, getattr(owner, attr))


def tampered() -> list[str]:
    """Public timer/sync names that no longer hold the originals."""
    capture()
    return [name for name, (owner, attr, orig) in _ORIG.items()
            if getattr(owner, attr, None) is not orig]


def restore() -> None:
    for owner, attr, orig in _ORIG.values():
        if getattr(owner, attr, None) is not orig:
            setattr(owner, attr, orig)


def _real(name: str) -> Any:
    capture()
    return _ORIG[name][2]


def llc_bytes() -> int:
    """Size of the largest CPU cache level (sysfs), 32 MB when unknown."""
    best = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        txt = f.read_text().strip().upper()
        try:
            mult = {"K": 1024, "M": 1024 ** 2}.get(txt[-1], 1)
            best = max(best, int(txt.rstrip("KM")) * mult)
        except ValueError:
            continue
    return best or 32 * 1024 ** 2


def cpu_flush_bytes(mb: int = 0) -> int:
    """What a CPU flush writes: ``mb`` MB where given (Settings.cpu_flush_mb), else twice the
    last-level cache, 256 MB at most. A virtual machine may report its host's whole cache
    (300 MB on a 2-core VM here): 256 MB written before each timed call was then most of a
    verification's CPU time, and a smaller flush is the user's call."""
    return mb << 20 if mb > 0 else min(2 * llc_bytes(), L2_FLUSH_BYTES)


class Timer:
    """Times single calls the protocol's way, with one flush buffer kept for all of them,
    made at the first flush (a candidate's process on the CPU never flushes: the judge does,
    from its own process, so it holds none)."""

    def __init__(self, device: str, flush_mb: int = 0, drop_hooks: bool = False):
        # the sandbox's: a candidate's forward is timed (a torch.profiler trace with Python
        # stacks would lose its tracer here too; the traces taken in the sandbox have none)
        self.clears_hooks = drop_hooks
        self.device = device
        self.cuda = device.startswith("cuda")
        self.size = L2_FLUSH_BYTES if self.cuda else cpu_flush_bytes(flush_mb)
        self._buf: Any = None
        self._n = 0

    def flush(self) -> None:
        import torch
        if self._buf is None:
            self._buf = torch.empty(self.size // 4, dtype=torch.float32,
                                    device=self.device if self.cuda else "cpu")
        self._n += 1
        self._buf.fill_(float(self._n))
        if self.cuda:
            torch.cuda.synchronize()

    def call(self, fn: Callable[[], Any], *, flush: bool = True) -> tuple[float, float, Any]:
        """(device ms, host wall ms, result) of one ``fn()`` (after a flush, on CUDA, unless
        the caller flushed already: a profiled call keeps the flush out of its trace)."""
        import torch
        if self.cuda and flush:
            self.flush()
        perf = time.perf_counter
        if not self.cuda:
            w0 = perf()
            out = fn()
            if self.clears_hooks:
                drop_hooks()
            wall = (perf() - w0) * 1e3
            return wall, wall, out
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        w0 = perf()
        start.record()
        out = fn()
        if self.clears_hooks:
            drop_hooks()
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        return start.elapsed_time(end), (perf() - w0) * 1e3, out


def time_forward(fn: Callable[..., Any], args: Sequence[Any], device: str, *,
                 trials: int, warmup: int) -> dict[str, float]:
    """{"ms": median device time, "wall_ms": median host wall time} of ``fn(*args)``."""
    import torch
    perf = _real("time.perf_counter")
    trials = max(1, int(trials))
    times, walls = [], []
    if device.startswith("cuda"):
        sync, event = _real("torch.cuda.synchronize"), _real("torch.cuda.Event")
        record, elapsed = _real("torch.cuda.Event.record"), _real("torch.cuda.Event.elapsed_time")
        ev_sync = _real("torch.cuda.Event.synchronize")
        flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
        for _ in range(max(0, warmup)):
            fn(*args)
        sync()
        w0 = perf()   # one untimed trial sizes the count
        flush.fill_(1.0)
        sync()
        fn(*args)
        sync()
        per = max((perf() - w0) * 1e3, 1e-3)
        trials = max(trials, min(MAX_TRIALS, int(TIME_BUDGET_MS / per)))
        for _ in range(trials):
            flush.fill_(1.0)
            sync()
            start, end = event(enable_timing=True), event(enable_timing=True)
            w0 = perf()
            record(start)
            fn(*args)
            sync()
            record(end)
            ev_sync(end)
            walls.append((perf() - w0) * 1e3)
            times.append(elapsed(start, end))
        del flush
    else:
        flush = torch.empty(cpu_flush_bytes() // 4, dtype=torch.float32)
        for _ in range(max(0, warmup)):
            fn(*args)
        for i in range(trials):
            flush.fill_(float(i))
            w0 = perf()
            fn(*args)
            walls.append((perf() - w0) * 1e3)
        times = list(walls)
        del flush
    return {"ms": statistics.median(times), "wall_ms": statistics.median(walls),
            "trials": trials}
