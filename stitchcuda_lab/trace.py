"""Pure parser: a chrome trace (torch.profiler's export) -> timeline rows and a kernel summary.

No torch import: it reads JSON and returns plain dicts the notebook plots and the Verdict keeps.
A row is ``{"lane", "name", "start_us", "dur_us", "cat"}`` with times relative to the first
event; the lane is ``"CPU thread N"`` for host events and ``"stream N"`` for device events.

>>> t = {"traceEvents": [
...   {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 7, "ts": 100, "dur": 5},
...   {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 110, "dur": 2,
...    "args": {"stream": 7}}]}
>>> [(r["lane"], r["start_us"]) for r in timeline(t)]
[('CPU thread 7', 0.0), ('stream 7', 10.0)]
>>> kernel_summary(t)[0]["name"], kernel_summary(t)[0]["share"]
('add_kernel', 1.0)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Iterable

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function")


def load(path_or_obj: str | Path | dict | list) -> list[dict]:
    """The trace's complete ("X") events from a file path, a JSON string's dict, or a list."""
    obj: Any = path_or_obj
    if isinstance(obj, (str, Path)):
        obj = json.loads(Path(obj).read_text())
    if isinstance(obj, dict):
        obj = obj.get("traceEvents", [])
    return [e for e in obj if isinstance(e, dict) and e.get("ph") == "X"
            and isinstance(e.get("ts"), (int, float))]


def lane(event: dict) -> str:
    cat = event.get("cat", "")
    if cat in DEVICE_CATS:
        stream = (event.get("args") or {}).get("stream", event.get("tid"))
        return f"stream {stream}"
    return f"CPU thread {event.get('tid')}"


def timeline(trace: Any, *, cats: Iterable[str] = DEVICE_CATS + HOST_CATS,
             max_rows: int = 500) -> list[dict]:
    """Rows sorted by start time; ``max_rows`` keeps the longest events when there are more."""
    wanted = set(cats)
    events = [e for e in load(trace) if e.get("cat", "") in wanted]
    if not events:
        return []
    t0 = min(float(e["ts"]) for e in events)
    if len(events) > max_rows:   # the longest, and the timer's first and last marks
        marks = sorted((e for e in events if is_timer_mark(e)), key=lambda e: float(e["ts"]))
        ends = marks[:1] + marks[-1:] if len(marks) > 1 else marks
        rest = [e for e in events if not any(e is m for m in ends)]
        events = ends + sorted(rest, key=lambda e: -float(e.get("dur", 0)))[
            :max(0, max_rows - len(ends))]
    rows = [{"lane": lane(e), "name": str(e.get("name", "")),
             "start_us": round(float(e["ts"]) - t0, 3), "dur_us": round(float(e.get("dur", 0)), 3),
             "cat": e.get("cat", "")} for e in events]
    rows.sort(key=lambda r: (r["start_us"], r["lane"]))
    return rows


def is_timer_mark(row: dict) -> bool:
    """A CUDA event recorded from the host: a timed call's start and end marks."""
    return row.get("cat") == "cuda_runtime" and str(row.get("name", "")).startswith(
        "cudaEventRecord")


def timed_window_us(rows: list[dict]) -> float | None:
    """What CUDA events around a call measure, read from its trace: from the host's record
    of the first event to the later of the last one and the last device work, in µs. The
    host's time before the first kernel (launch overhead, Python) is inside it, as it is in
    the verdict's times; None when the rows hold no device work or fewer than two marks."""
    marks = [r for r in rows if is_timer_mark(r)]
    device = [r for r in rows if r.get("cat") in DEVICE_CATS]
    if len(marks) < 2 or not device:
        return None
    start = min(r["start_us"] for r in marks)
    end = max(r["start_us"] + r["dur_us"] for r in marks + device)
    return end - start


def from_first_mark(rows: list[dict]) -> list[dict]:
    """Rows of a timed call from its timer's start mark on, shifted to start at 0 (what came
    before, the profiler's own warm-up, is not the call); unchanged without two marks."""
    marks = [r for r in rows if is_timer_mark(r)]
    if len(marks) < 2:
        return rows
    t0 = min(r["start_us"] for r in marks)
    return [{**r, "start_us": round(r["start_us"] - t0, 3)} for r in rows
            if r["start_us"] + r["dur_us"] > t0]


def span_us(rows: list[dict]) -> float:
    """First start to last end of timeline rows, in µs (the traced forward's length)."""
    if not rows:
        return 0.0
    return max(r["start_us"] + r["dur_us"] for r in rows) - min(r["start_us"] for r in rows)


def kernel_summary(trace: Any, *, top: int = 30) -> list[dict]:
    """Per-kernel totals (name, count, total_us, share), longest first.

    Device kernels when the trace has any; otherwise top-level host ops and the runtime's
    ``stitch::<kernel>`` ranges (a CPU run: the candidate's C kernels appear as themselves), so
    the summary still says where the time went.
    """
    events = load(trace)
    picked = [e for e in events if e.get("cat") == "kernel"]
    if not picked:
        picked = _top_level([e for e in events if e.get("cat") == "cpu_op" or (
            e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("stitch::"))])
    totals: dict[str, list[float]] = {}
    for e in picked:
        t = totals.setdefault(str(e.get("name", "")), [0, 0.0])
        t[0] += 1
        t[1] += float(e.get("dur", 0))
    whole = sum(t[1] for t in totals.values()) or 1.0
    out: list[dict[str, Any]] = [{"name": n, "count": int(c), "total_us": round(d, 3), "share": round(d / whole, 4)}
           for n, (c, d) in totals.items()]
    out.sort(key=lambda r: -r["total_us"])
    return out[:top]


def streams(trace: Any) -> set[str]:
    """The device streams kernels ran on (as the trace names them)."""
    return {str((e.get("args") or {}).get("stream", e.get("tid")))
            for e in load(trace) if e.get("cat") == "kernel"}


def _top_level(events: list[dict]) -> list[dict]:
    """Host ops not nested inside another op of the same thread."""
    out: list[dict] = []
    by_tid: dict[Any, list[dict]] = {}
    for e in sorted(events, key=lambda e: (float(e["ts"]), -float(e.get("dur", 0)))):
        by_tid.setdefault(e.get("tid"), []).append(e)
    for evs in by_tid.values():
        end = -1.0
        for e in evs:
            if float(e["ts"]) >= end:
                out.append(e)
                end = float(e["ts"]) + float(e.get("dur", 0))
    return out
