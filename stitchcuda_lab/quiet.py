"""Keep the profiler's own log lines out of the notebook and the command line; a leaf.

torch's Kineto profiler writes ``USDT:... profiler_start`` / ``profiler_stop`` (and on older
builds ``STAGE:...``) straight to file descriptor 2 whenever a trace starts or stops. In a
notebook that lands as a red stderr box above the panel. ``quiet_profiler()`` sends fd 2 to a
temporary file for the duration and writes back every line that is not such a log line, so
real errors still reach the person. The graph's eager profile runs inside it (every caller:
the CLI, the magic, the bench), and so do the magic's panel updates.

>>> is_noise("USDT:2026-12-01 08:20:35 5420:5420 SyncActivityProfilerHandler.cpp:52] profiler_start")
True
>>> is_noise("RuntimeError: boom")
False
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

NOISE = re.compile(r"^(USDT|STAGE):\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ [\w.]+\.cpp:\d+\]")


def is_noise(line: str) -> bool:
    return bool(NOISE.match(line.strip()))


@contextlib.contextmanager
def quiet_profiler() -> Iterator[None]:
    """Drop the profiler's log lines written to fd 2 inside the block; keep everything else."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):       # no real fd 2 here: nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().decode(errors="replace").splitlines()
                    if not is_noise(ln)]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                sys.stderr.flush()
