"""Timing a forward the way the Verification protocol says, with clocks a candidate cannot touch.

``capture()`` runs when the worker starts and keeps private references to the timers and
synchronize functions; timing uses only those, and ``tampered()`` names any public one that a
candidate replaced (the Verifier rejects it as "patched_timer" and ``restore()`` puts them back).
The same watch covers the functions the caller names (the Verifier's own checks and the torch
functions its comparison uses; a replaced one is "patched_verifier"): candidate code runs in
this process.

CUDA: warm-ups, a 256 MB write before every trial (flushes the 50 MB L2), start event,
forward, device-wide synchronize, end event; median over trials. ``trials`` is a floor: a
forward of a fraction of a millisecond gets as many trials as fit in TIME_BUDGET_MS (at most
MAX_TRIALS), so one host hiccup among 20 trials cannot move the median of a 0.2 ms forward.
Host wall time per forward is measured around the same call. CPU: the same structure with
perf_counter and exactly ``trials`` trials, flushing by writing a buffer twice the size of the
last-level cache.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

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
            (torch, "torch.", "equal")]


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
        flush = torch.empty(min(2 * llc_bytes(), L2_FLUSH_BYTES) // 4, dtype=torch.float32)
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
