"""The worker isolates candidate faults: the caller carries on and the same Worker passes next."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stitchcuda_lab.errors import ConfigError
from stitchcuda_lab.verifier import worker as worker_mod
from stitchcuda_lab.verifier.worker import clean_env, resolve_device

ADV = __import__("pathlib").Path(__file__).parent.parent / "adversarial"
POINTWISE = (ADV / "problems" / "pointwise.py").read_text()
GOOD = (ADV / "candidates" / "pass_c_kernel.py").read_text()

SEGFAULT = '''
import ctypes
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.memset(0, 1, 64)   # write to address 0
        return x
'''

HANG = '''
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            pass
'''

HOG_TORCH = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty(1 << 44, dtype=torch.uint8)   # 16 TiB
'''

HOG_PYTHON = '''
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [bytearray(1 << 40) for _ in range(64)]   # 64 TiB of host memory
'''


def test_segfault_is_a_runtime_error_and_the_next_verification_passes(cpu_worker, fast_options):
    cpu_worker.start()
    pid = cpu_worker.pid
    v = cpu_worker.verify(POINTWISE, SEGFAULT, replaced=None, options=fast_options, timeout=60)
    assert v.status == "runtime_error"
    assert v.reason.startswith("crash:") and "SIGSEGV" in v.reason
    assert "Segmentation fault" in v.build_log  # faulthandler's report from the child
    again = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert again.status == "pass", again.reason
    assert cpu_worker.alive and cpu_worker.pid == pid  # the judge never ran the candidate


def _sandboxes_of(judge_pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"verifier.sandbox" in (entry / "cmdline").read_bytes():
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == judge_pid:     # this judge's own candidate processes
                    out.append(int(entry.name))
        except OSError:
            continue
    return out


def test_hang_is_killed_as_timeout_and_the_next_verification_passes(cpu_worker, fast_options):
    cpu_worker.start()
    pid = cpu_worker.pid
    t0 = time.monotonic()
    v = cpu_worker.verify(POINTWISE, HANG, replaced=None, options=fast_options, timeout=5)
    assert time.monotonic() - t0 < 20
    assert v.status == "timeout" and v.reason.startswith("timeout")
    time.sleep(0.5)
    assert len(_sandboxes_of(pid)) <= 1   # the hung process is gone; only the next spare is up
    again = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert again.status == "pass", again.reason


@pytest.mark.parametrize("source", [HOG_TORCH, HOG_PYTHON], ids=["torch_alloc", "python_alloc"])
def test_memory_exhaustion_fails_fast_and_the_next_verification_passes(cpu_worker, fast_options,
                                                                       source):
    t0 = time.monotonic()
    v = cpu_worker.verify(POINTWISE, source, replaced=None, options=fast_options, timeout=60)
    assert time.monotonic() - t0 < 30
    assert v.status == "runtime_error"
    assert v.reason.startswith("out_of_memory"), v.reason
    again = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert again.status == "pass", again.reason


def test_worker_is_reused_while_healthy(cpu_worker, fast_options):
    cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    pid = cpu_worker.pid
    v = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert v.status == "pass" and cpu_worker.pid == pid


def test_a_job_that_patched_its_timers_leaves_the_judge_untouched(cpu_worker, fast_options):
    patched = (Path(__file__).parent.parent / "adversarial/candidates/patched_timer.py").read_text()
    cpu_worker.start()
    pid = cpu_worker.pid
    v = cpu_worker.verify(POINTWISE, patched, replaced=None, options=fast_options, timeout=60)
    assert v.status == "rejected" and v.reason.startswith("patched_timer")
    again = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert again.status == "pass" and cpu_worker.pid == pid   # its timers were never patched


def test_worker_environment_has_no_api_keys(cpu_worker, fast_options, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    monkeypatch.setenv("MY_SECRET_THING", "x")
    monkeypatch.setenv("STITCH_HARMLESS", "kept")
    monkeypatch.setenv("STITCH_BASE_URL", "https://user:pw@llm.example/v1")
    probe = '''
import os
import torch
import torch.nn as nn
LEAKED = sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k
                or k.startswith("STITCH_"))
assert not LEAKED, LEAKED      # nothing of the caller's configuration, the cache's folder neither

class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''
    cpu_worker.close()
    v = cpu_worker.verify(POINTWISE, probe, replaced=None, options=fast_options, timeout=60)
    # the probe imports fine (no keys leak), then fails on values: that is the point
    assert v.status in ("incorrect", "rejected"), (v.status, v.reason, v.build_log)


def test_clean_env_strips_keys_tokens_and_secrets():
    env = clean_env({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "b", "FOO_API_KEY": "c",
                     "GITHUB_TOKEN": "d", "AWS_SECRET_ACCESS_KEY": "e", "PATH": "/bin",
                     "STITCH_TRIALS": "5"})
    assert env == {"PATH": "/bin", "STITCH_TRIALS": "5"}


def test_resolve_device_auto_is_cpu_without_a_gpu():
    import torch
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


def test_resolve_device_cuda_without_a_gpu_says_so():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="unknown device"):
        resolve_device("tpu")


def test_get_worker_returns_one_worker_per_device_and_cache(settings):
    a = worker_mod.get_worker("cpu", settings)
    b = worker_mod.get_worker("auto" if not _has_cuda() else "cpu", settings)
    c = worker_mod.get_worker("cpu", settings.replace(cache_dir=settings.cache_dir + "_other"))
    assert a is b and a is not c
    assert a.device == "cpu"
    # the kernel cache's bound reaches the judge, which does the candidates' builds
    d = worker_mod.get_worker("cpu", settings.replace(cache_max_mb=7))
    assert d is not a and d.cache_max_mb == 7


def test_get_worker_keeps_only_the_latest_few_judges_running(settings, fast_options,
                                                            monkeypatch):
    # a test suite or a notebook going through many cache folders must not pile up judges
    # (each holds torch and a spare): the older ones are closed, and start again when asked
    monkeypatch.setattr(worker_mod, "LIVE_WORKERS", 1)   # one judge start fewer than at 2
    ws = []
    for i in range(worker_mod.LIVE_WORKERS + 2):
        ws.append(worker_mod.get_worker("cpu", settings.replace(cache_dir=f"{settings.cache_dir}_{i}")))
        ws[-1].start()
    oldest = ws[0]
    assert not oldest.alive and not ws[1].alive
    assert all(w.alive for w in ws[-worker_mod.LIVE_WORKERS:])
    assert list(worker_mod._WORKERS.values()) == ws[-worker_mod.LIVE_WORKERS:]
    v = oldest.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert v.status == "pass", v.reason     # a closed judge starts again for its holder
    oldest.close()


def _running(pid: int, wait: float = 2.0) -> bool:
    """Whether ``pid`` still runs after ``wait`` s (a zombie waiting for init does not)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        except OSError:
            return False
        time.sleep(0.1)
    return True


# forks a child that leaves the sandbox's session and spins, writes its pid, then hangs
HANG_WITH_CHILD = '''
import os
import torch.nn as nn
pid = os.fork()
if pid == 0:
    os.setsid()
    while True:
        pass
with open(os.path.join({folder!r}, "pid"), "w") as f:
    f.write(str(pid))
while True:
    pass
'''


def test_a_judge_killed_mid_job_leaves_no_folders_and_no_processes(cpu_worker, fast_options):
    import os
    import tempfile
    import threading
    from stitchcuda_lab.verifier.pool import mode
    cpu_worker.start()
    disk, memory = cpu_worker._scratch
    folder = Path(tempfile.mkdtemp(prefix="stitch_test_pid_"))
    os.chmod(folder, 0o1777)
    done: list = []
    t = threading.Thread(target=lambda: done.append(cpu_worker.verify(
        POINTWISE, HANG_WITH_CHILD.format(folder=str(folder)), replaced=None,
        options=fast_options, timeout=60)))
    t.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (folder / "pid").exists():
            time.sleep(0.2)
        assert any(memory.glob("stitch_out_*")) and any(disk.glob("stitch_sandbox_*"))
        time.sleep(0.3)
        child = int((folder / "pid").read_text())
        cpu_worker.kill()        # as on a timeout seen by the caller, or at exit
        t.join(30)
        assert done and done[0].status == "runtime_error"
        assert not disk.exists() and not memory.exists()
        if mode() != "same-user":   # a child of the caller's own user is not told apart
            assert not _running(child), "the candidate's child outlived it"
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def test_verify_files_infers_the_policy_and_names_the_candidate(settings, tmp_path):
    from pathlib import Path

    from stitchcuda_lab.verifier.worker import verify_files
    adv = Path(__file__).parent.parent / "adversarial"
    v = verify_files(adv / "problems/pointwise.py", adv / "candidates/fallback_functional.py",
                     "cpu", settings)
    assert v.status == "rejected" and v.reason.startswith("pytorch_fallback")
    assert v.candidate_id == "fallback_functional"
    assert "aten.relu.default" in v.aten_ops


def _has_cuda() -> bool:
    import torch
    return torch.cuda.is_available()


CALLER_THAT_DIES = '''
import os, sys, time
from pathlib import Path
from stitchcuda_lab.verifier.worker import Worker
w = Worker("cpu", cache_dir=sys.argv[1])
w.start()


def descendants(root):
    """Every process under root: the spare candidate process, spawned or forked from the
    zygote (which is under the judge too)."""
    parent = {}
    for e in Path("/proc").iterdir():
        try:
            if e.name.isdigit():
                parent[int(e.name)] = int((e / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


for _ in range(300):   # the judge starts its spare candidate process
    spares = descendants(w.pid)
    if any(b"verifier.sandbox" in Path(f"/proc/{p}/cmdline").read_bytes()
           or Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1] != str(w.pid)
           for p in spares if Path(f"/proc/{p}").exists()):
        break
    time.sleep(0.1)
print(w.pid, *spares, flush=True)
os._exit(0)     # no cleanup: as if killed past a bench timeout
'''


def test_a_judge_whose_caller_died_goes_and_takes_its_candidate_processes(tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", CALLER_THAT_DIES, str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
    judge, *spares = (int(p) for p in out.stdout.split())
    assert spares, "the judge started no candidate process"
    alive = [judge, *spares]
    deadline = time.monotonic() + 15
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists()]
        time.sleep(0.2)
    assert not alive, f"outlived their caller: {alive} (judge {judge})"


def test_two_threads_sharing_a_judge_each_get_their_own_verdict(cpu_worker, fast_options):
    """Two sessions on the same settings share one judge (get_worker): a notebook's panel
    verifying in the background while another cell verifies. Their jobs take turns on its
    pipe; neither reads the other's reply as tampering."""
    import threading
    done: dict[int, object] = {}

    def verify(i: int) -> None:
        done[i] = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options,
                                    timeout=120, candidate_id=f"c{i}")

    threads = [threading.Thread(target=verify, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert {i: (v.status, v.candidate_id) for i, v in done.items()} == {
        0: ("pass", "c0"), 1: ("pass", "c1")}, {i: v.reason for i, v in done.items()}


def test_compile_cache_is_a_folder_only_the_judges_user_writes(tmp_path, monkeypatch):
    from stitchcuda_lab.verifier import pool
    monkeypatch.setattr(pool, "mode", lambda: "user")
    env = worker_mod.compile_cache_env(tmp_path / "cache")
    assert env == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache" / "compile" / "inductor"),
                   "TRITON_CACHE_DIR": str(tmp_path / "cache" / "compile" / "triton")}
    assert (tmp_path / "cache" / "compile").stat().st_mode & 0o777 == 0o700
    (tmp_path / "cache" / "compile").chmod(0o777)          # others may write in it: not used
    assert worker_mod.compile_cache_env(tmp_path / "cache") == {}
    # candidates running as the judge's user could leave code there for a baseline to load
    monkeypatch.setattr(pool, "mode", lambda: "same-user")
    assert worker_mod.compile_cache_env(tmp_path / "other") == {}
    monkeypatch.setattr(pool, "mode", lambda: "user")
    open_parent = tmp_path / "open"
    open_parent.mkdir(mode=0o777)
    open_parent.chmod(0o777)     # anyone could swap the folder below it for their own
    assert worker_mod.compile_cache_env(open_parent / "cache") == {}
    open_parent.chmod(0o1777)    # sticky, as /tmp: entries are their owners' alone
    assert worker_mod.compile_cache_env(open_parent / "cache") != {}


def test_the_baselines_compile_into_the_cache_kept_for_the_next_judge(tmp_path, fast_options,
                                                                     monkeypatch):
    """torch.compile's graphs outlive the judge that compiled them (a judge's temp folder
    goes with it), and a candidate sees neither the folder nor a way to write there. The
    caller's own Inductor folder (Inductor puts its default in the environment once it has
    compiled) is not the judge's."""
    import dataclasses
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "callers"))

    from stitchcuda_lab.verifier.pool import mode
    from stitchcuda_lab.verifier.worker import Worker
    if mode() == "same-user":
        pytest.skip("candidates run as the judge's user here: no cache is kept")
    cache = tmp_path / "cache"
    w = Worker("cpu", cache_dir=str(cache))
    try:
        w.baseline(POINTWISE, options=dataclasses.replace(fast_options, compile_modes="default"))
        compiled = [p for p in (cache / "compile" / "inductor").rglob("*") if p.is_file()]
        assert compiled, "torch.compile wrote nothing to the kept cache"
        probe = f'''
import os
import torch.nn as nn
assert not any("compile" in v for k, v in os.environ.items() if "CACHE" in k), os.environ
assert not os.access({str(cache / "compile")!r}, os.W_OK)

class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''
        v = w.verify(POINTWISE, probe, replaced=None, options=fast_options, timeout=60)
        assert v.status in ("incorrect", "rejected"), (v.status, v.reason, v.build_log)
    finally:
        w.close()


BIG_POINTWISE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2.0

def get_inputs():
    return [torch.randn(256, 1024, 1024)]   # 1 GiB

def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_the_compiled_baselines_give_their_memory_back(tmp_path, fast_options):
    """After its baselines a judge holds no more with reduce-overhead timed than without:
    the CUDA graphs' pool (the input's static copy and the output, 2 GiB here) went with
    them. It stayed, and a mean over an 8.6 GB input on the H100 had no memory left for the
    candidate's checks."""
    import dataclasses

    import torch

    from stitchcuda_lab.verifier.worker import Worker
    held = {}
    for modes in ("default", "default,reduce-overhead"):
        w = Worker("cuda", cache_dir=str(tmp_path / modes))
        try:
            free = torch.cuda.mem_get_info()[0]
            w.baseline(BIG_POINTWISE, options=dataclasses.replace(fast_options,
                                                                  compile_modes=modes))
            held[modes] = free - torch.cuda.mem_get_info()[0]
        finally:
            w.close()
    assert held["default,reduce-overhead"] - held["default"] < (512 << 20), held


def test_the_judge_out_of_memory_is_named_so_the_bench_can_rerun_it_alone():
    from stitchcuda_lab.verdict import Verdict
    from stitchcuda_lab.verifier.worker import internal_error
    oom = internal_error("Traceback (most recent call last):\n  ...\ntorch.OutOfMemoryError: "
                         "CUDA out of memory. Tried to allocate 8.00 GiB.")
    other = internal_error("Traceback (most recent call last):\nKeyError: 'x'")
    assert Verdict(status="runtime_error", reason=oom).reason_name == "out_of_memory"
    assert Verdict(status="runtime_error", reason=other).reason_name == "exception"
    assert oom.endswith("Tried to allocate 8.00 GiB.") and "KeyError: 'x'" in other
    cuda = internal_error('Traceback (most recent call last):\n  File "verify.py", line 9, in '
                          'run\n    x = torch.empty(n)\ntorch.AcceleratorError: CUDA error: '
                          'out of memory\nCompile with `TORCH_USE_CUDA_DSA` to enable '
                          'device-side assertions.')
    assert cuda.startswith("out_of_memory:") and cuda.endswith("CUDA error: out of memory")
    code = internal_error('Traceback (most recent call last):\n  File "x.py", line 3, in f\n'
                          '    raise_out_of_memory_error()  # out of memory\nKeyError: 1')
    assert code.startswith("exception:")   # a source line quoting the words is not the error
