"""A sandbox's files, seen from another candidate's user."""

from __future__ import annotations

import os
import stat

import pytest

from stitchcuda_lab.verifier.pool import Sandbox


def test_a_sandbox_log_is_readable_by_the_judge_alone():
    # the log holds what the candidate prints; a concurrent job's candidate or the next spare's
    # must not read it
    box = Sandbox("cpu", 1)
    try:
        mode = stat.S_IMODE(box._log.stat().st_mode)
        assert mode & 0o077 == 0, oct(mode)
        assert stat.S_IMODE(box.folder.stat().st_mode) & 0o077 == 0
        assert stat.S_IMODE(box.outputs.stat().st_mode) & 0o077 == 0
    finally:
        box.destroy()


def test_the_users_record_names_only_whole_sandbox_records(tmp_path):
    from stitchcuda_lab.verifier.pool import FIRST_UID, USERS_FILE, recorded_users
    u = FIRST_UID + 12345
    (tmp_path / USERS_FILE).write_text(f"{u} {u + 1}\n1000\n0 1\n{FIRST_UID - 5} "
                                       f"{FIRST_UID - 4}\n{u + 7} {u + 9}\n{u + 20} " + str(u + 2)[:3])
    assert recorded_users(tmp_path) == {u, u + 1}
    assert recorded_users(tmp_path / "missing") == set()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_kill_user_ends_every_process_of_the_user_children_included():
    import subprocess
    import time
    from pathlib import Path

    from stitchcuda_lab.verifier.pool import FIRST_UID, kill_user
    uid = FIRST_UID + 424242
    # a parent that starts a child in a session of its own, then both sleep
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 300 & sleep 300"], user=uid, group=uid,
                            extra_groups=[], start_new_session=True)
    time.sleep(0.5)

    def mine() -> list[int]:
        return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                and p.stat().st_uid == uid
                and (p / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert len(mine()) >= 2
    kill_user(uid)
    proc.wait(10)
    time.sleep(0.3)
    assert mine() == []


def test_a_gpu_pool_keeps_two_spares_and_a_cpu_pool_one():
    """A CUDA spare takes seconds to start, so two are kept (each then has two verdicts'
    time to start); a CPU spare is a fork, so one. Nothing starts until ``fill``."""
    from stitchcuda_lab.verifier.pool import Pool
    assert Pool("cuda:0", 1).spares == 2
    assert Pool("cpu", 1).spares == 1
    assert Pool("cuda", 1, spares=3).spares == 3


def test_a_pool_starts_one_spare_first_and_the_others_after_the_job(monkeypatch):
    """Processes that start side by side each start slower: a cold pool starts one and waits
    for it; nothing starts while the candidate runs; the rest start after the job (``fill``)."""
    from stitchcuda_lab.verifier import pool as pool_mod

    started: list[str] = []

    class Box:
        alive = True

        def __init__(self):
            self.n = sum(e.startswith("start") for e in started)
            started.append(f"start {self.n}")

        def wait_ready(self):
            started.append(f"ready {self.n}")

    p = pool_mod.Pool("cuda", 1)
    monkeypatch.setattr(p, "_new", Box)
    p.fill(at_most=1)
    p.take()
    assert started == ["start 0", "ready 0"]      # the job runs with nothing starting
    p.fill()                                       # what run_verify does after the job
    assert started == ["start 0", "ready 0", "start 1", "start 2"]
    assert len(p._spares) == 2
    p.take()                                       # a warm pool: one ready, nothing started
    assert started[-1] == "ready 1" and len(p._spares) == 1


SPINNER = """
import mmap, os, sys, threading, time
count = mmap.mmap(-1, 8)
def spin():
    n = 0
    while True:
        n += 1
        count[:8] = n.to_bytes(8, "little")
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
sys.stdout.write("up\\n"); sys.stdout.flush()
while True:   # a whole count or none: written aside, then renamed over the report
    time.sleep(0.01)
    with open(sys.argv[1] + ".new", "wb") as f:
        f.write(count[:8])
    os.replace(sys.argv[1] + ".new", sys.argv[1])
"""


def _wait_for(cond, limit: float = 10.0) -> None:
    import time
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.01)


def test_a_frozen_sandbox_runs_nothing_until_it_is_let_go(tmp_path):
    """The judge reads a timed call's outputs with the candidate's process frozen: no thread
    of it (here two spinning ones, and one that reports their count) moves meanwhile, and
    all of them go on after."""
    import subprocess
    import sys
    import time
    import types
    report = tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", SPINNER, str(report)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "up\n"
        _wait_for(lambda: report.exists())
        box = types.SimpleNamespace(proc=proc, _others=lambda: [])
        with Sandbox.frozen(box):
            states = {open(f"/proc/{proc.pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0]
                      for t in os.listdir(f"/proc/{proc.pid}/task")}
            before = report.read_bytes()
            time.sleep(0.2)
            assert report.read_bytes() == before and states <= {"T", "t", "D"}
        # on a loaded host the reporting thread may wait its turn for the interpreter's
        # lock behind the two spinning ones: it must move again, not within a set time
        _wait_for(lambda: report.read_bytes() != before)
    finally:
        proc.kill()
        proc.wait()


# a process of the candidate's that is not one of its threads: a forked child that writes a
# shared count (what a clone(CLONE_VM) sibling does to the outputs), in the sandbox's process
# group, or out of it (its own session) where only the judge's list of its processes finds it
SIBLING = """
import mmap, os, sys, time
count = mmap.mmap(-1, 8)
child = os.fork()
if child == 0:
    if sys.argv[2] == "escape":
        os.setsid()
    n = 0
    while True:
        n += 1
        count[:8] = n.to_bytes(8, "little")
sys.stdout.write(f"{child}\\n"); sys.stdout.flush()
while True:
    time.sleep(0.01)
    with open(sys.argv[1] + ".new", "wb") as f:
        f.write(count[:8])
    os.replace(sys.argv[1] + ".new", sys.argv[1])
"""


@pytest.mark.parametrize("how", ["group", "escape"])
def test_a_freeze_stops_the_candidates_other_processes_too(tmp_path, how):
    """A sibling sharing the candidate's memory computed its outputs after the reply while the
    judge read them; frozen, it moves no more than the sandbox's own threads."""
    import signal
    import subprocess
    import sys
    import time
    import types
    report = tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", SIBLING, str(report), how],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(proc.stdout.readline())
    try:
        _wait_for(lambda: report.exists())
        # in the group, the group's stop alone must reach it; out of it, the list of the
        # candidate's processes
        box = types.SimpleNamespace(proc=proc, _others=lambda: [child] if how == "escape" else [])
        with Sandbox.frozen(box):
            time.sleep(0.05)
            state = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0]
            assert state in ("T", "t")
        # the sandbox's reports resume and the child counts on
        _wait_for(lambda: open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0]
                  in ("R", "S"))
    finally:
        for pid in (child, proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.wait()


def test_a_file_given_to_a_sandbox_never_follows_a_link_the_candidate_left(tmp_path):
    """The judge (root) puts the libraries it built into the candidate's own folder. A link
    under the name it picks is refused rather than written through, and the file made is the
    sandbox user's while the link's target keeps its owner and bytes (a chown by path, after
    a copy of milliseconds, followed a link swapped in meanwhile)."""
    from stitchcuda_lab.verifier.pool import give
    folder, victim = tmp_path / "box", tmp_path / "secret.key"
    folder.mkdir()
    victim.write_bytes(b"secret")
    os.symlink(victim, folder / "lib_a.so")
    with pytest.raises(FileExistsError):
        give(folder, "lib_a.so", None, b"code")
    assert victim.read_bytes() == b"secret"
    src = tmp_path / "built.so"
    src.write_bytes(b"x" * (3 << 20))
    uid = None if os.getuid() != 0 else 123_457
    made = give(folder, "lib_b.so", uid, src=str(src))
    st = os.lstat(made)
    assert stat.S_ISREG(st.st_mode) and made.read_bytes() == src.read_bytes()
    assert stat.S_IMODE(st.st_mode) == 0o600
    if uid is not None:
        assert st.st_uid == uid and os.stat(victim).st_uid == 0
