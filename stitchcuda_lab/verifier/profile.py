"""One forward under torch.profiler (CPU + CUDA activities) -> chrome trace dict.

The dict goes to ``stitchcuda_lab.trace`` for timeline rows and kernel summaries, and to the
side-stream check (which streams kernels ran on, whether they were joined).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any
from collections.abc import Callable, Sequence

from .. import trace as trace_mod

SYNC_CALLS = ("StreamWaitEvent", "StreamSynchronize", "DeviceSynchronize", "EventSynchronize",
              "cuStreamWaitEvent", "cuCtxSynchronize")
MAX_ROWS = 300


def profile_forward(fn: Callable[..., Any], args: Sequence[Any], device: str) -> dict:
    """Chrome trace (as a dict) of one ``fn(*args)``, synchronised at the end."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(ProfilerActivity.CUDA)
    with profile(activities=acts) as prof:
        fn(*args)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="stitch_trace_")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def trace_to_file(fn: Callable[[], Any], device: str, path: str, *, warm: bool = False
                  ) -> Any:
    """``fn()`` under torch.profiler (CPU ops of every thread, CUDA kernels of every stream),
    its chrome trace written to ``path``; returns what ``fn`` returned.

    ``warm`` (CUDA): first an op and a fill kernel under the same profiler, so that a timed call's
    trace does not carry the profiler's start-up. On the H200 a session's first aten op came
    70 µs after the timer's start mark and its first launch took 200-300 µs, against 5-10
    µs for the next ones. What ``warm`` runs lies before the timer's marks, which is where
    the Profile tab's rows begin (``rows``)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(ProfilerActivity.CUDA)
    with profile(activities=acts) as prof:
        if warm and device.startswith("cuda"):   # a CPU trace has no marks to start from
            torch.empty(256, device=device).fill_(1.0)
            torch.cuda.synchronize()
        out = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    return out


def read_trace(path: str, limit: int = 256 * 1024 * 1024) -> dict:
    """A trace a sandbox wrote, read without following links and at most ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if os.fstat(fd).st_size > limit:
            raise ValueError(f"the trace is larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = json.loads(f.read(limit))
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        raise ValueError("the trace is not a JSON object")
    events = data.get("traceEvents")
    if isinstance(events, list):   # the sandbox's op counter, not the candidate's work
        data["traceEvents"] = [e for e in events if not (
            isinstance(e, dict) and e.get("name") == "PythonDispatchMode")]
    return data


def kernel_names(trace: dict) -> list[str]:
    return [str(e.get("name", "")) for e in trace_mod.load(trace) if e.get("cat") == "kernel"]


def cpu_ops(trace: dict) -> dict[str, int]:
    """Ops of every thread in a trace, counted (the profiler sees what a dispatch mode
    switched off or another thread would hide): aten's and every other operator namespace's
    (``mkldnn::_linear_pointwise`` is a GEMM with its ReLU; ``quantized::``, ``onednn::``),
    not the autograd engine's or the profiler's own records."""
    counts: dict[str, int] = {}
    for e in trace_mod.load(trace):
        n = str(e.get("name", ""))
        if e.get("cat") == "cpu_op" and OPERATOR.match(n) and not n.startswith(NOT_OPS):
            counts[n] = counts.get(n, 0) + 1
    return counts


OPERATOR = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_]\w*(\.\w+)?$")   # namespace::op[.overload]
NOT_OPS = ("autograd::", "torch::", "profiler::", "c10::")


def device_to_host(trace: dict) -> list[str]:
    """Copies from the device to the host inside a traced forward."""
    return sorted({str(e.get("name", "")) for e in trace_mod.load(trace)
                   if e.get("cat") in ("gpu_memcpy", "kernel")
                   and "DtoH" in str(e.get("name", ""))})


def device_ms(trace: dict) -> float:
    """How long the device was busy with kernels and copies in a trace (ms): the union of
    their intervals, less the fills (a checked call runs with every new allocation filled with
    NaN, which a timed call does not). A union, not a sum: kernels of several streams, or of a
    CUDA graph's parallel branches (cuDNN's RNNs run layers side by side), overlap in time,
    and their summed durations exceed the wall time an honest timer reports."""
    spans = sorted((float(e.get("ts", 0) or 0), float(e.get("dur", 0) or 0))
                   for e in trace_mod.load(trace)
                   if e.get("cat") in ("kernel", "gpu_memcpy")
                   and "fill" not in str(e.get("name", "")).lower())
    busy, end = 0.0, -float("inf")
    for start, dur in spans:
        stop = start + max(0.0, dur)
        if stop <= end:
            continue
        busy += stop - max(start, end)
        end = stop
    return busy / 1e3


def rows(trace: dict) -> list[dict]:
    """The Profile tab's rows: a timed call's from its timer's start mark on."""
    return trace_mod.from_first_mark(trace_mod.timeline(trace, max_rows=MAX_ROWS))


def unjoined_streams(candidate: dict, reference: dict) -> list[str]:
    """Streams the candidate's kernels used beyond the reference's, when nothing joined them.

    Work on a second stream is legitimate when the candidate makes the current stream wait
    for it (an event wait or a synchronize); a trace with extra streams and no such call is
    the side-stream pattern.
    """
    extra = sorted(trace_mod.streams(candidate) - trace_mod.streams(reference))
    if not extra:
        return []
    names = [str(e.get("name", "")) for e in trace_mod.load(candidate)
             if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    if any(any(s in n for s in SYNC_CALLS) for n in names):
        return []
    return extra


def compiled_graphs(trace: dict) -> list[str]:
    """Graphs torch.compile (Inductor) ran in a trace, by the mark it puts around each call
    ("## Call CompiledFxGraph <key> ##"): on the CPU their C++ loops dispatch no aten op."""
    return sorted({str(e.get("name", "")) for e in trace_mod.load(trace)
                   if "CompiledFxGraph" in str(e.get("name", ""))})


def pytorch_kernels(candidate: dict) -> list[str]:
    """PyTorch's own compute kernels in a trace (copies and fills excluded).

    Catches eager ops hidden from the dispatcher, e.g. replayed from a captured CUDA graph.
    """
    out = []
    for e in trace_mod.load(candidate):
        n = str(e.get("name", ""))
        if e.get("cat") == "kernel" and "at::native" in n and not any(
                s in n.lower() for s in ("copy", "fill", "memset", "index")):
            out.append(n)
    return sorted(set(out))
