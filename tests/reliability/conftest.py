"""Fault-injection helpers: a tiny tmpfs (a disk that fills), fast CLI settings."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
ADV = ROOT / "tests" / "adversarial"


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs (needs root); skips where it cannot be mounted."""
    d = tmp_path / "tiny"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def fill(directory: Path, leave: int) -> Path:
    """Write a filler file so that about ``leave`` bytes stay free; returns it (delete to free)."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    filler = directory / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The caller's environment with fast, isolated STITCH_* settings (',' = no compile mode)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STITCH_")}
    env.update(STITCH_CACHE_DIR=str(tmp / "cache"), STITCH_TIMING_TRIALS="3",
               STITCH_WARMUP="1", STITCH_COMPILE_MODES=",", STITCH_PROFILE="0",
               STITCH_TIMEOUT="120", STITCH_TRIALS="5", STITCH_CPU_FLUSH_MB="16")
    env.update(extra)
    return env
