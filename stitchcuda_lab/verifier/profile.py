"""One forward under torch.profiler (CPU + CUDA activities) -> chrome trace dict.

The dict goes to ``stitchcuda_lab.trace`` for timeline rows and kernel summaries, and to the
side-stream check (which streams kernels ran on, whether they were joined).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Sequence

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


def rows(trace: dict) -> list[dict]:
    return trace_mod.timeline(trace, max_rows=MAX_ROWS)


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
