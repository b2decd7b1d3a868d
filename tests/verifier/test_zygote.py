"""CPU sandboxes forked from the zygote: as clean as spawned ones, and ready in milliseconds."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from stitchcuda_lab.verifier.pool import Pool


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")   # in the judge's environment only
    p = Pool("cpu", 1)
    if not p.zygote():
        pytest.skip("the zygote did not start here")
    yield p
    p.close()


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def test_a_forked_sandbox_is_ready_fast_and_holds_only_its_own_descriptors(pool):
    first = pool._new()          # the first fork pays what is left of the warm-up
    first.wait_ready()
    first.destroy()
    t = time.monotonic()
    box = pool._new()
    box.wait_ready()
    took = time.monotonic() - t
    try:
        pid = box.proc.pid
        assert int(_stat(pid)[1]) == pool.zygote().proc.pid      # forked, not spawned
        assert took < 1.5, f"a forked sandbox took {took:.2f} s to be ready"
        fds = sorted(int(n) for n in os.listdir(f"/proc/{pid}/fd"))
        assert len(fds) <= 3 + 2 + 4, fds   # stdio, its two pipes, what torch opens itself
        targets = [os.readlink(f"/proc/{pid}/fd/{n}") for n in fds]
        assert not any(t.startswith("socket:") for t in targets), targets   # not the zygote's
        assert int(_stat(pid)[3]) == pid                          # a session of its own
        assert os.readlink(f"/proc/{pid}/cwd") == str(box.folder)
        # /proc shows the environment the process was exec'd with: the zygote's, which is a
        # sandbox's environment too (the child's own replaces it in os.environ)
        env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes()
                   .decode().split("\0") if "=" in kv)
        assert "ANTHROPIC_API_KEY" not in env
        assert not any(k.startswith("STITCH_") for k in env)
    finally:
        box.destroy()


def test_a_forked_sandbox_reports_its_end_as_popen_would(pool):
    box = pool._new()
    box.wait_ready()
    os.kill(box.proc.pid, signal.SIGKILL)
    box.proc.wait(timeout=10)
    assert box.proc.returncode == -signal.SIGKILL
    assert box.exit_reason() == "killed by SIGKILL"
    box.destroy()


def test_closing_the_pool_ends_the_zygote_and_its_sandboxes(pool):
    box = pool._new()
    box.wait_ready()
    zygote = pool.zygote().proc.pid
    pool.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (Path(f"/proc/{zygote}").exists()
                                           or Path(f"/proc/{box.proc.pid}").exists()):
        time.sleep(0.05)
    gone = [p for p in (zygote, box.proc.pid)
            if Path(f"/proc/{p}").exists() and _stat(p)[0] != "Z"]
    assert not gone, f"still running: {gone}"
