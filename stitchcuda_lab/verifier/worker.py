"""The isolated worker: every build and every run of generated code happens in it.

One process per device, started with ``python -m stitchcuda_lab.verifier.worker``, in its own
session (process group), with an environment stripped of API keys and tokens, reused while
healthy. It is restarted after a crash, a CUDA error or a job that left it in doubt (patched
timers, background threads), and killed when a job runs past its timeout (the Verdict then says
"timeout"). The caller's process never runs candidate code and carries on whatever happens.

Protocol: length-prefixed JSON messages on two pipes handed to the child (not stdin/stdout, so
a candidate that prints cannot corrupt it); the child's stdout and stderr go to a log file whose
tail explains crashes. Every job carries a fresh nonce that its reply must echo: a reply without
it was written by candidate code into the pipe ("protocol_tampering"; the worker is replaced).

>>> w = get_worker("cpu", Settings())                                       # doctest: +SKIP
>>> w.verify(problem_src, candidate_src, options=VerifyOptions(), timeout=60).status
'pass'
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import threading
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Iterable

from ..errors import ConfigError, WorkerError
from ..redact import has_credentials
from ..settings import LLM_ENV, public_environ
from ..verdict import Verdict
from . import channel
from .failures import says_out_of_memory
from .options import VerifyOptions
from .pool import end_users, shared_memory

__all__ = ["Worker", "WorkerHandle", "get_worker", "resolve_device", "clean_env",
           "VerifyOptions"]

START_TIMEOUT = 120.0
JUDGE_GRACE = 60.0   # the judge stops a candidate at its timeout; the caller waits this longer


def clean_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment for a worker: the caller's, less API keys, tokens and secrets
    (``settings.looks_secret``), the LLM agents' configuration (``settings.LLM_ENV``) and any
    value holding a URL with credentials."""
    env = {k: v for k, v in public_environ(base).items()
           if k.upper() not in LLM_ENV and not k.upper().startswith(("OPENAI_", "ANTHROPIC_"))
           and not has_credentials(v)}
    env.update(extra)
    return env


def compile_cache_env(cache_dir: Path) -> dict[str, str]:
    """Where the judge's torch.compile keeps what it compiled (Inductor's graphs, Triton's
    kernels) from one judge to the next: a folder of the cache only the judge's user may
    write, so the baselines of a problem compile once per problem and environment (Inductor's
    keys: the graph, its inputs, torch and the device) instead of once per judge, whose
    temp folder is new each time. Nothing where candidates run as the judge's own user
    (``pool.mode()``: they could leave code there for a baseline to load). The judge drops
    the caller's folders (``_child_main``): Inductor writes its default one into the
    environment once it has compiled anything, a folder the judge cannot vouch for."""
    from .pool import mode
    if mode() == "same-user":
        return {}
    folder = cache_dir.absolute() / "compile"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        # the folders Inductor and Triton load from too: a cache brought from elsewhere
        # (benchmarks/kernelbench.sh) could carry a folder anyone may write in
        inner = [p for p in (folder / "inductor", folder / "triton") if p.exists()]
        if not all(_only_ours(p) for p in (*inner, folder, *folder.parents)):
            return {}   # one another user could replace, or write in
    except OSError:
        return {}
    return {"TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
            "TRITON_CACHE_DIR": str(folder / "triton")}


def internal_error(text: str) -> str:
    """A verdict's reason for the judge's own failure (its traceback's last line). Out of
    memory is named as such: the judge ran out beside the candidate's process (on an H100 a
    judge of 33 GB and a candidate of 45 GB over an 8.6 GB input), and a bench of several
    problems on one GPU reruns such a problem alone."""
    lines = text.strip().splitlines() or [""]
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    said = lines[frames[-1] + 2:] if frames else lines   # the exception's own lines
    oom = next((line for line in said if says_out_of_memory(line)), None)
    # CUDA's errors end in a hint line: the line that names the memory is the one to show
    return f"{'out_of_memory' if oom else 'exception'}: internal worker error: " \
           f"{oom or lines[-1]}"


def _only_ours(folder: Path) -> bool:
    """Owned by this user or root, and no one else may write in it (or only into entries of
    their own: the sticky bit, as on /tmp)."""
    info = folder.lstat()
    if info.st_uid not in (0, os.geteuid()) or stat.S_ISLNK(info.st_mode):
        return False
    return not info.st_mode & 0o022 or bool(info.st_mode & stat.S_ISVTX)


def resolve_device(name: str) -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; 'cuda' without a GPU is a ConfigError."""
    name = (name or "auto").strip().lower()
    if name == "cpu":
        return "cpu"
    try:
        import torch
        has_cuda = torch.cuda.is_available()
        count = torch.cuda.device_count() if has_cuda else 0
    except ImportError:
        has_cuda, count = False, 0
    if name == "auto":
        return "cuda" if has_cuda else "cpu"
    if name == "cuda" or re.fullmatch(r"cuda:\d+", name):
        if not has_cuda:
            raise ConfigError(f"device {name!r} was asked for, but this machine has no CUDA GPU "
                              "(or torch is a CPU build)",
                              hint="use --device cpu (or auto), or run on a GPU machine")
        if ":" in name and int(name.split(":")[1]) >= count:
            raise ConfigError(f"device {name!r} does not exist: {count} GPU(s) visible",
                              hint=f"use cuda:0 .. cuda:{count - 1}")
        return name
    raise ConfigError(f"unknown device {name!r}", hint="use auto, cpu, cuda or cuda:N")


class WorkerHandle(Protocol):
    """What the Session asks of the Verifier: ``Worker`` (below) is the real one; tests and
    tools pass their own (``Session.create(worker=...)``)."""

    def verify(self, problem_source: str, candidate_source: str, *,
               replaced: Iterable[str] | None = (), kept: Iterable[str] = (),
               options: VerifyOptions | None = None, timeout: float = 300.0) -> Verdict:
        """The candidate's Verdict; the candidate's faults are a Verdict, never an exception."""
        ...

    def baseline(self, problem_source: str, *,
                 options: VerifyOptions | None = None) -> dict[str, float]:
        """Eager and torch.compile timings (ms) of the problem's reference."""
        ...


class Worker:
    """A handle on one worker process; methods never raise for the candidate's faults."""

    def __init__(self, device: str, *, cache_dir: str, cache: bool = True,
                 cache_max_mb: int | None = None, env: dict[str, str] | None = None,
                 memory_limit: int | None = None):
        self.device = device
        self.cache_dir = cache_dir
        self.cache = cache
        # the kernel cache's bound (Settings.cache_max_mb); None: the judge's own settings
        self.cache_max_mb = cache_max_mb
        self.memory_limit = memory_limit
        self._extra_env = dict(env or {})
        self._proc: subprocess.Popen | None = None
        self._rfd = self._wfd = -1
        self._log: Path | None = None
        self._scratch: list[Path] = []   # the judge's and its sandboxes' folders, disk and memory
        self.busy = False                 # a job is in flight (get_worker closes no busy one)
        # the thread whose job is in flight: another thread's kill() (at exit, a caller's own
        # timeout) ends the process but leaves the pipes to it, so that its read sees the end
        # of the pipe, not a closed (or reused) descriptor
        self._job_thread: int | None = None
        self._close_pending = False
        # one job at a time on the pipe: sessions on the same settings share this judge
        # (get_worker), and a notebook's panel verifies from a thread of its own
        self._jobs = threading.Lock()
        self.restarts = 0
        self.info: dict[str, Any] = {}

    # -- lifecycle --
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        if self.alive:
            return
        self._cleanup()
        self._discard_scratch()   # a judge that died on its own (between jobs) left them
        if self._log is not None:
            self._log.unlink(missing_ok=True)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # everything the judge and its sandboxes write goes under two folders of this worker's,
        # removed when it is killed: a judge killed mid-job cannot clean up after itself
        disk = Path(tempfile.mkdtemp(prefix="stitch_worker_"))
        memory = Path(tempfile.mkdtemp(prefix="stitch_worker_", dir=shared_memory()))
        for folder in (disk, memory):
            os.chmod(folder, 0o711)   # each sandbox's user passes through to its own folder
        self._scratch = [disk, memory]
        fd, log = tempfile.mkstemp(prefix="stitch_worker_", suffix=".log")
        self._log = Path(log)
        env = clean_env()
        env.update(self._extra_env)     # as keywords, a variable named "base" would be taken
        env["TMPDIR"] = str(disk)
        env.update(STITCH_CACHE_DIR=str(self.cache_dir), STITCH_CACHE="1" if self.cache else "0",
                   TORCH_EXTENSIONS_DIR=str(Path(self.cache_dir) / "torch_extensions"),
                   PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
        if self.cache_max_mb is not None:
            env["STITCH_CACHE_MAX_MB"] = str(self.cache_max_mb)
        # the judge runs the Verifier this process imported, not whichever copy of the package
        # its working folder (the temp folder) or an installed one would give it
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in env.get("PYTHONPATH", "")
                                                      .split(os.pathsep) if p and p != here])
        if self.memory_limit:
            env["STITCH_WORKER_MEMORY"] = str(self.memory_limit)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "stitchcuda_lab.verifier.worker", self.device,
                 str(to_child_r), str(from_child_w), str(memory)],
                pass_fds=(to_child_r, from_child_w), env=env, stdin=subprocess.DEVNULL,
                stdout=fd, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(disk))
        except OSError as e:
            raise WorkerError(f"cannot start the worker process: {e}") from None
        finally:
            os.close(fd)
            os.close(to_child_r)
            os.close(from_child_w)
        self._wfd, self._rfd = to_child_w, from_child_r
        msg = self._recv(START_TIMEOUT)
        if msg is None or not msg.get("ready"):
            tail = self.log_tail()
            self.kill()
            raise WorkerError(f"the {self.device} worker did not start: {tail or 'no output'}",
                              hint="run `stitchcuda-lab doctor` to check torch and the GPU")
        self.info = msg

    def close(self) -> None:
        if self._proc is not None and self.alive:
            try:
                self._send({"op": "exit"})
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._log is not None:   # kill() keeps it: the caller reads why the judge died
            self._log.unlink(missing_ok=True)
            self._log = None

    def kill(self) -> None:
        """Kill the worker's whole process group (its compilers and children too)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._cleanup()
        self._discard_scratch()

    def _discard_scratch(self) -> None:
        """What the judge's candidates left running, then the judge's folders."""
        if self._scratch:
            end_users(self._scratch[1])
        for folder in self._scratch:
            shutil.rmtree(folder, ignore_errors=True)
        self._scratch = []

    def restart(self) -> None:
        self.kill()
        self.restarts += 1
        self.start()

    def _cleanup(self) -> None:
        if self._job_thread not in (None, threading.get_ident()):
            self._close_pending = True
            return
        self._close_pending = False
        for fd in (self._rfd, self._wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._rfd = self._wfd = -1

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self._log.read_text(errors="replace")[-n:].strip() if self._log else ""
        except OSError:
            return ""

    # -- jobs --
    def verify(self, problem_source: str, candidate_source: str, *,
               replaced: Iterable[str] | None = (), kept: Iterable[str] = (),
               options: VerifyOptions | None = None, timeout: float = 300.0,
               candidate_id: str = "") -> Verdict:
        """Run the Verification protocol on a candidate. ``replaced=None``: infer (files)."""
        options = options or VerifyOptions()
        job = {"op": "verify", "problem_source": problem_source, "timeout": timeout,
               "candidate_source": candidate_source,
               "replaced": None if replaced is None else list(replaced), "kept": list(kept),
               "options": options.to_dict(), "candidate_id": candidate_id}
        reply = self._job(job, timeout + JUDGE_GRACE)
        if "verdict" in reply:
            return Verdict.from_dict(reply["verdict"])
        status = reply["status"]
        return Verdict(status=status, reason=reply["reason"], candidate_id=candidate_id,
                       device=self.device, build_log=reply.get("log", ""))

    def baseline(self, problem_source: str, *, options: VerifyOptions | None = None,
                 timeout: float = 600.0) -> dict[str, float]:
        """Eager and torch.compile timings (ms) of the problem's reference, cached per worker."""
        reply = self._job({"op": "baseline", "problem_source": problem_source,
                           "options": (options or VerifyOptions()).to_dict()}, timeout)
        if "timings" not in reply:
            raise WorkerError(f"baseline failed: {reply.get('reason')}", hint=reply.get("log"))
        return reply["timings"]

    def prebuild(self, problem_source: str, candidate_sources: list[str], *,
                 options: VerifyOptions | None = None, timeout: float = 300.0) -> list[dict]:
        """Compile several candidates' kernels side by side, into the cache, before each is
        verified alone (verifier/prebuild.py): one dict per candidate, ``loaded`` and
        ``build_ms`` or ``failure``. Only speeds up what follows; decides nothing."""
        reply = self._job({"op": "prebuild", "problem_source": problem_source,
                           "candidate_sources": list(candidate_sources), "timeout": timeout,
                           "options": (options or VerifyOptions()).to_dict()},
                          timeout * len(candidate_sources) + JUDGE_GRACE)
        return list(reply.get("prebuilt") or [{"loaded": False, "failure": reply.get("reason")}
                                              for _ in candidate_sources])

    def ping(self, timeout: float = 30.0) -> dict:
        return self._job({"op": "ping"}, timeout)

    def _job(self, job: dict, timeout: float) -> dict:
        """Send one job; crash / timeout / internal error become status dicts, never raises."""
        with self._jobs:
            self.busy = True
            self._job_thread = threading.get_ident()
            try:
                return self._run_job(job, timeout)
            finally:
                self._job_thread = None
                self.busy = False
                if self._close_pending:
                    self._cleanup()

    def _run_job(self, job: dict, timeout: float) -> dict:
        self.start()
        job = dict(job, nonce=secrets.token_hex(16))
        try:
            self._send(job)
        except OSError:
            self.restart()
            self._send(job)
        t0 = time.monotonic()
        msg = self._recv(timeout)
        if msg is not None and msg.get("nonce") != job["nonce"]:
            self.kill()   # the real reply may still be on its way: never reuse this pipe
            return {"status": "rejected", "reason": "protocol_tampering: a reply without this "
                    "job's nonce arrived on the worker's pipe (candidate code wrote to it)",
                    "log": self.log_tail()}
        if msg is None:
            if self.alive and time.monotonic() - t0 >= timeout - 0.05:
                self.kill()
                return {"status": "timeout", "reason": f"timeout: the job ran past {timeout:g} s "
                        "and the worker was killed", "log": self.log_tail()}
            code = self._proc.wait(timeout=10) if self._proc else None
            why = _signal_name(code)
            log = self.log_tail()
            self.kill()
            return {"status": "runtime_error", "reason": f"crash: the worker process died ({why})",
                    "log": log}
        if "internal_error" in msg:
            self.kill()
            return {"status": "runtime_error", "reason": internal_error(msg["internal_error"]),
                    "log": msg["internal_error"]}
        if not msg.get("healthy", True):
            self.kill()  # the next job starts a fresh process
        return msg

    def _send(self, obj: dict) -> None:
        channel.send(self._wfd, obj)

    def _recv(self, timeout: float) -> dict | None:
        """One message, or None on EOF (the child died) or when ``timeout`` passes."""
        return channel.recv(self._rfd, timeout)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Worker({self.device!r}, pid={self.pid}, restarts={self.restarts})"


def _signal_name(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


_WORKERS: dict[tuple, Worker] = {}   # least recently asked for first
# Each judge holds torch and a forked spare (about 0.6 GB on the CPU): a process that goes
# through many cache settings (a notebook trying several, a test suite) keeps the latest few
# running; an older one is closed and starts again if its holder asks it for another job.
LIVE_WORKERS = 2
# every worker get_worker handed out, closed at exit: a closed one that its holder asked for
# another job started again outside _WORKERS
_STARTED: weakref.WeakSet[Worker] = weakref.WeakSet()


def get_worker(device: str, settings: Any) -> Worker:
    """The shared worker for (device, cache settings), started on first use."""
    dev = resolve_device(device)
    key = (dev, settings.cache_dir, settings.cache, settings.cache_max_mb)
    w = _WORKERS.pop(key, None)
    if w is None:
        w = Worker(dev, cache_dir=settings.cache_dir, cache=settings.cache,
                   cache_max_mb=settings.cache_max_mb)
    _WORKERS[key] = w
    _STARTED.add(w)
    for old in list(_WORKERS)[:-LIVE_WORKERS]:
        if not _WORKERS[old].busy:   # one in the middle of a job (another thread's) stays
            _WORKERS.pop(old).close()
    return w


@atexit.register
def _close_all() -> None:
    for w in {*_WORKERS.values(), *_STARTED}:
        try:
            w.close()
        except Exception:  # noqa: BLE001  (exiting anyway)
            pass
    _WORKERS.clear()


def verify_files(problem_path: str | os.PathLike, candidate_path: str | os.PathLike,
                 device: str, settings: Any) -> Verdict:
    """Verify a KernelBench-form candidate file against a problem file (CLI ``verify``).

    The candidate declares nothing, so the op policy is inferred: every compute op that is not
    a library op (mm, addmm, bmm, convolution, ...) and not in the file's ``KEPT_OPS`` list is a
    PyTorch fallback (verifier/antihack.py).
    """
    from ..errors import UsageError
    try:
        problem_source = Path(problem_path).read_text()
        candidate_source = Path(candidate_path).read_text()
    except OSError as e:
        raise UsageError(f"cannot read {e.filename}: {e.strerror}") from None
    worker = get_worker(device, settings)
    return worker.verify(problem_source, candidate_source, replaced=None, kept=(),
                         options=VerifyOptions.from_settings(settings), timeout=settings.timeout,
                         candidate_id=Path(candidate_path).stem)


# --- the child side ------------------------------------------------------------------------

def _child_main(device: str, rfd: int, wfd: int, memory: str | None = None) -> None:
    """The judge: the trusted process. It never imports candidate code (verify.py)."""
    import faulthandler
    faulthandler.enable()
    _not_traceable()
    channel.exit_with_parent()
    # OpenMP threads that spin after a parallel region take the CPU from whatever runs next
    # (the judge's clock would charge it to the next contender): every process here sleeps
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    # decided here, where the sandboxes' isolation is decided: what the judge compiles is kept
    for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        os.environ.pop(key, None)   # the caller's (Inductor sets its default in os.environ)
    if os.environ.get("STITCH_CACHE") == "1" and os.environ.get("STITCH_CACHE_DIR"):
        os.environ.update(compile_cache_env(Path(os.environ["STITCH_CACHE_DIR"])))
    limit = os.environ.get("STITCH_WORKER_MEMORY")
    if not device.startswith("cuda"):
        _limit_memory(int(limit) if limit else None)
    import traceback

    import torch

    from .prebuild import run_prebuild
    from .verify import WorkerState, run_baseline, run_verify
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device).index or 0)  # "cuda" has no index
        torch.zeros(1, device=device)
    # the trusted side fixes the threads every contender gets (a candidate cannot lower the
    # baselines': they run here)
    threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    state = WorkerState(device=device, workdir=Path(tempfile.mkdtemp(prefix="stitch_judge_")),
                        threads=threads)
    from .pool import Pool
    state.pool = Pool(device, threads, memory=Path(memory) if memory else None)
    state.pool.fill(at_most=1)   # the first spare starts now, while the caller gets ready
    if not device.startswith("cuda"):   # which libm calls vectorise, asked once (0.5 s)
        from ..runtime import build
        threading.Thread(target=build.vector_math, args=(build.c_compiler(),),
                         daemon=True).start()
    from .sandbox import _warm
    _warm(device)       # the profiler's first start costs seconds: not in a verdict
    channel.send(wfd, {"ready": True, "pid": os.getpid(), "torch": torch.__version__,
                       "device": device})
    while True:
        job = channel.recv(rfd)
        if job is None:
            state.pool.close()
            return
        op = job.get("op")
        if op == "exit":
            state.pool.close()
            return
        try:
            if op == "verify":
                reply = run_verify(job, state)
            elif op == "baseline":
                reply = run_baseline(job, state)
            elif op == "prebuild":
                reply = run_prebuild(job, state)
            elif op == "ping":
                reply = {"pong": True, "pid": os.getpid(), "jobs": state.jobs}
            else:
                reply = {"internal_error": f"unknown op {op!r}"}
        except BaseException:  # noqa: BLE001  (report, never die silently)
            reply = {"internal_error": traceback.format_exc()[-4000:]}
        sys.stdout.flush()
        sys.stderr.flush()
        channel.send(wfd, dict(reply, nonce=job.get("nonce")))


def _not_traceable() -> None:
    """No process of the same user may trace this one or read its memory (PR_SET_DUMPABLE 0)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _limit_memory(limit: int | None) -> None:
    """Cap the CPU worker's address space so a runaway allocation fails fast (MemoryError)."""
    import resource
    if limit is None:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return
        limit = max(int(total * 0.6), 4 * 1024 ** 3)
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


if __name__ == "__main__":
    _child_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                sys.argv[4] if len(sys.argv) > 4 else None)
