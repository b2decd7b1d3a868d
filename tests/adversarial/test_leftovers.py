"""Nothing a candidate makes outlives its job: fault_ipc_and_lock_leftovers.py leaves a SysV
shared memory segment, a POSIX message queue and a file in /run/lock, which no process holds
and no temporary folder keeps; after its verdict none of them may be there."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import pytest

from stitchcuda_lab.verifier.options import VerifyOptions
from stitchcuda_lab.verifier.worker import Worker

HERE = Path(__file__).parent
CANDIDATE = HERE / "candidates" / "fault_ipc_and_lock_leftovers.py"
KEY, QUEUE, FILE = 0x57C4_1EF7, b"/stitch_leftover_queue", "/run/lock/.stitch_leftover_fill"


def shm_keys() -> set[int]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines}


def queue_exists(name: bytes) -> bool:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    fd = rt.mq_open(name, os.O_RDONLY)
    if fd >= 0:
        rt.mq_close(fd)
        rt.mq_unlink(name)   # not to fail the next run as well
        return True
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="candidates run under users of their own as root "
                    "only (without root they run as the caller, whose objects are its own)")
def test_ipc_objects_and_files_a_candidate_leaves_are_gone_after_its_job(tmp_path):
    text = CANDIDATE.read_text()
    assert f"KEY = {KEY:#_X}".replace("0X", "0x") in text and QUEUE.decode() in text and FILE in text
    assert KEY not in shm_keys() and not os.path.exists(FILE)
    with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
        v = w.verify((HERE / "problems" / "pointwise.py").read_text(), text, replaced=None,
                     options=VerifyOptions(trials=5, timing_trials=3, warmup=1,
                                           compile_modes="", profile=False, cpu_flush_mb=16),
                     timeout=120)
    assert v.status == "pass", v.reason
    left = [what for what, there in (("a SysV segment", KEY in shm_keys()),
                                     ("a message queue", queue_exists(QUEUE)),
                                     (FILE, os.path.exists(FILE))) if there]
    assert not left, left


@pytest.mark.skipif(os.geteuid() != 0, reason="candidates run under users of their own as root "
                    "only (without root a process in a session of its own is out of reach)")
def test_no_process_of_a_candidate_outlives_its_job(tmp_path):
    """fault_process_chain_outlives_job.py leaves chains of processes that hop to a new pid
    faster than a kill by pid can follow; once its verdict is in (the worker still up for the
    next job), no heartbeat of theirs may come."""
    cand = HERE / "candidates" / "fault_process_chain_outlives_job.py"
    beat = Path("/tmp/.stitch_chain_heartbeat")
    beat.unlink(missing_ok=True)
    with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
        v = w.verify((HERE / "problems" / "pointwise.py").read_text(), cand.read_text(),
                     replaced=None, options=VerifyOptions(trials=5, timing_trials=3, warmup=1,
                                                          compile_modes="", profile=False,
                                                          cpu_flush_mb=16),
                     timeout=120)
        assert v.status == "runtime_error", v.reason
        time.sleep(0.3)
        beat.unlink(missing_ok=True)
        time.sleep(1.0)
        alive = beat.exists()
    beat.unlink(missing_ok=True)
    assert not alive, "a process of the candidate's was still writing after its job"


@pytest.mark.skipif(os.geteuid() != 0, reason="candidates run under users of their own as root "
                    "only (without root they run as the caller, whose files are its own)")
def test_a_file_left_in_a_world_writable_folder_inside_tmp_is_gone_after_its_job(tmp_path):
    """/tmp/.X11-unix and its like (a folder of /tmp that anyone may write to) keep what a
    candidate writes there past its job, as /tmp itself did before its files were removed."""
    import shutil
    import tempfile
    shared = tempfile.mkdtemp(prefix="stitch_test_shared_")
    os.chmod(shared, 0o1777)
    left = os.path.join(shared, "kept")
    candidate = (HERE / "candidates" / "pass_c_kernel.py").read_text() + (
        f"\nopen({left!r}, 'wb').write(b'x' * 4096)\n")
    try:
        with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
            v = w.verify((HERE / "problems" / "pointwise.py").read_text(), candidate,
                         replaced=None, options=VerifyOptions(
                             trials=5, timing_trials=3, warmup=1, compile_modes="",
                             profile=False, cpu_flush_mb=16), timeout=120)
        assert v.status == "pass", v.reason
        assert not os.path.exists(left)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
