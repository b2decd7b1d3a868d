"""Faults around the command line, all in subprocesses running the real CLI with the real
offline agents and worker: kill -9 of `optimize` mid-iteration then `resume` (nothing earlier
lost), a problem that loops forever at import (bounded, clear), a truncated session log line
(the session still opens and resumes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from stitchcuda_lab.store import SessionStore, StoreWarning

from .conftest import ADV, ROOT, cli_env

PROBLEM = ADV / "problems" / "pointwise.py"


def cli(*args, env, timeout=240):
    return subprocess.run([sys.executable, "-m", "stitchcuda_lab", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(ROOT), check=False)


def raw_events(session_dir: Path) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        return [r.to_dict() for r in SessionStore(session_dir.parent, secrets=[])
                .open(session_dir.name).records(resolve=True)]


def _workers_of(cache_dir: Path) -> list[int]:
    """Worker processes started for this test's cache folder (their environment says so)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if b"stitchcuda_lab.verifier.worker" in cmd and \
                f"STITCH_CACHE_DIR={cache_dir}".encode() in env.split(b"\0"):
            pids.append(int(d.name))
    return pids


def test_kill_9_of_optimize_mid_iteration_then_resume_loses_nothing(tmp_path):
    root = tmp_path / "sessions"
    env = cli_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "stitchcuda_lab", "optimize", str(PROBLEM),
                             "--device", "cpu", "--iters", "1", "--out", str(root), "--json",
                             "--quiet"], env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    events = None
    while time.monotonic() < deadline:           # kill once a candidate is being verified
        found = list(root.glob("*/events.jsonl"))
        if found and b'"candidate_approved"' in found[0].read_bytes():
            events = found[0]
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    assert events is not None, "optimize never reached verification"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    session_dir = events.parent
    before = raw_events(session_dir)
    assert before and before[-1]["kind"] in ("candidate_approved", "verdict_ready")
    assert "finished" not in [e["kind"] for e in before]

    listed = json.loads(cli("sessions", "--out", root, "--json", env=env).stdout)
    assert [(m["id"], m["status"]) for m in listed] == [(session_dir.name, "interrupted")]

    r = cli("resume", session_dir.name, "--out", root, "--json", "--quiet", env=env)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["phase"] == "done" and result["session_id"] == session_dir.name
    assert result["status"] in ("pass", "incorrect", "rejected", "build_error",
                                "runtime_error", "timeout")
    after = raw_events(session_dir)
    assert after[:len(before)] == before                     # nothing earlier lost or changed
    assert [e["seq"] for e in after] == list(range(1, len(after) + 1))
    kinds = [e["kind"] for e in after[len(before):]]
    assert "verdict_ready" in kinds and kinds[-1] == "finished"
    assert [e["kind"] for e in after].count("plan_proposed") == 1   # nothing redone
    shown = json.loads(cli("sessions", "show", session_dir.name, "--out", root, "--json",
                           env=env).stdout)
    assert shown["meta"]["status"] == "done"

    # the killed CLI's worker does not linger: it exits when its pipe closes
    deadline = time.monotonic() + 60
    while _workers_of(tmp_path / "cache") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _workers_of(tmp_path / "cache")


def test_optimize_on_a_problem_that_loops_forever_at_import_ends_with_a_clear_message(tmp_path):
    looping = tmp_path / "loops.py"
    looping.write_text(PROBLEM.read_text() + "\nwhile True:\n    pass\n")
    env = cli_env(tmp_path, STITCH_TIMEOUT="5")
    t0 = time.monotonic()
    r = cli("optimize", looping, "--device", "cpu", "--out", tmp_path / "s", "--json", "--quiet",
            env=env, timeout=90)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()                  # one line, no traceback
    assert f"the problem {looping} did not finish validating within 5 s" in line
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").iterdir())
    r = cli("verify", looping, ADV / "candidates" / "pass_c_kernel.py", "--device", "cpu",
            env=env, timeout=90)
    assert r.returncode == 2 and "did not finish validating within 5 s" in r.stderr


def test_a_truncated_session_log_line_still_opens_and_resumes(tmp_path):
    root = tmp_path / "sessions"
    env = cli_env(tmp_path)
    r = cli("optimize", PROBLEM, "--device", "cpu", "--iters", "0", "--out", root, "--json",
            "--quiet", env=env)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["session_id"]
    events = root / sid / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    # cut the terminal event in half, as a crash in the middle of its write would
    assert b'"finished"' in lines[-1]
    events.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    kept = raw_events(root / sid)
    assert len(kept) == len(lines) - 1

    shown = cli("sessions", "show", sid, "--out", root, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["meta"]["status"] == "interrupted"
    r = cli("resume", sid, "--out", root, "--json", "--quiet", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phase"] == "done"
    after = raw_events(root / sid)
    assert after[:len(kept)] == kept and after[-1]["kind"] == "finished"
    assert list(root.glob(f"{sid}/events.torn-*")), "the torn tail is set aside, not deleted"
