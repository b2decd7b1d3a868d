"""Candidate processes: started ahead as spares, used for one candidate, then destroyed.

A spare is ``python -m stitchcuda_lab.verifier.sandbox`` with torch imported and the CUDA
context up, waiting for a job, so a verdict does not wait for a process to start (seconds on a
GPU machine); on the CPU it is forked from the pool's zygote instead (zygote.py), which has
imported torch once for all of them. It runs in a session of its own, with an environment that holds nothing of the
caller's (no API keys, no ``STITCH_*``, no cache folder: only what Python, torch and the
compilers need), in a folder of its own. When the judge is root the job runs under a user of
its own (a fresh uid per candidate) with its home and the rest of ``/root`` hidden: it can
then neither signal nor trace any other process, nor write a file it did not make, nor read
the kernel cache's secret. ``destroy`` kills every process of that user (or of the sandbox's
session), and removes every file it left in the temporary folders.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

from . import channel

ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
            "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
            "CC", "CXX", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST")
# the folders any user may write to on a usual Linux host (/run/lock is one too, on the disk)
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
FIRST_UID = 200_000     # sandbox users are FIRST_UID + a random number below 2^30
USERS_FILE = "users"   # in a judge's folder in memory: the uids its sandboxes were given
START_TIMEOUT = 180.0
KILL_ROUNDS = 20      # rounds of killing a sandbox user's processes until none is left
# spares kept started, per device kind. On a GPU host a spare takes seconds to start (torch,
# the CUDA context, NVRTC: 6-10 s seen on the H200) and a verdict about one, so with one spare
# the next verdict waited for it (1-2 s of a 2.4 s warm edit; most of a bench's back-to-back
# verdicts). Two give each spare the time of two verdicts to start. On the CPU a spare is a
# fork of the zygote, ready in milliseconds.
SPARES = {"cuda": 2, "cpu": 1}
# where sandboxes are forked from a zygote (torch imported once) rather than spawned. A GPU
# sandbox forked before any CUDA call starts its own CUDA context after the fork.
FORKED = {"cuda": False, "cpu": True}


def sandbox_env(folder: Path, threads: int) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    here = str(Path(__file__).resolve().parents[2])
    env.update(HOME=str(folder), TMPDIR=str(folder), PYTHONPATH=here, PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1", PYTHONFAULTHANDLER="1",
               OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE",
               TORCH_EXTENSIONS_DIR=str(folder / "torch_ext"),
               TRITON_CACHE_DIR=str(folder / "triton"),
               TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor"))
    return env


class Sandbox:
    """One candidate process: a spare until its job, destroyed after it."""

    def __init__(self, device: str, threads: int, zygote: Any = None,
                 memory: Path | None = None):
        self.device, self.threads = device, threads
        how = mode()
        self.uid = FIRST_UID + secrets.randbelow(1 << 30) if how != "same-user" else None
        self.folder = Path(tempfile.mkdtemp(prefix="stitch_sandbox_"))
        os.chmod(self.folder, 0o700)
        if self.uid is not None:
            os.chown(self.folder, self.uid, self.uid)
        to_r, self._wfd = os.pipe()
        self._rfd, from_w = os.pipe()
        self._pending = bytearray()   # bytes read ahead by ``readable``, not yet a message
        self._eof = False
        self._log = self.folder.parent / f"{self.folder.name}.log"
        # the judge's alone: another candidate (a concurrent job, the next spare's) must not
        # read what this one prints, nor this one theirs
        log = os.fdopen(os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                                0o600), "wb")
        env = sandbox_env(self.folder, threads)
        # hide what the user may not see; show what Python needs
        expose = _exposed() if how == "user+namespace" else None
        try:
            if zygote is not None:   # forked from a process that has imported torch already
                self.proc: Any = zygote.spawn(env=env, cwd=str(self.folder),
                                              fds=(to_r, from_w, log.fileno()), expose=expose)
            else:
                cmd = [sys.executable, "-m", "stitchcuda_lab.verifier.sandbox", device,
                       str(to_r), str(from_w)]
                if expose is not None:
                    cmd = [shutil.which("unshare") or "unshare", "--mount", "--propagation",
                           "private", "--", *cmd, json.dumps(expose)]
                self.proc = subprocess.Popen(
                    cmd, pass_fds=(to_r, from_w), env=env, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                    cwd=str(self.folder))
        finally:
            log.close()
            os.close(to_r)
            os.close(from_w)
        self.ready = False
        memory = memory or shared_memory()
        self.outputs = Path(tempfile.mkdtemp(prefix="stitch_out_", dir=memory))
        os.chmod(self.outputs, 0o700)
        if self.uid is not None:
            os.chown(self.outputs, self.uid, self.uid)
        # timed calls' inputs, drawn by the judge: the sandbox's group may read, not write
        # (setgid, so the files are in that group too)
        self.inputs = Path(tempfile.mkdtemp(prefix="stitch_in_", dir=memory))
        # ... written first where the sandbox cannot look (its group, for the files, but no
        # access), and moved into ``inputs`` once the judge's clock runs (exchange.reveal)
        self.staging = Path(tempfile.mkdtemp(prefix="stitch_stage_", dir=memory))
        if self.uid is not None:
            os.chown(self.inputs, os.getuid(), self.uid)
            os.chmod(self.inputs, 0o2750)
            os.chown(self.staging, os.getuid(), self.uid)
            os.chmod(self.staging, 0o2700)
        else:
            os.chmod(self.inputs, 0o700)
            os.chmod(self.staging, 0o700)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        if self.ready:
            return
        msg = channel.recv(self._rfd, timeout)
        if msg is None or not msg.get("ready"):
            tail = self.log_tail()
            self.destroy()
            raise RuntimeError(f"the candidate process did not start: {tail or 'no output'}")
        self.ready = True

    def give(self, name: str, data: bytes | None = None,
             src: str | os.PathLike[str] | None = None) -> Path:
        """A new file in the sandbox's folder, its user's (``give``)."""
        return give(self.folder, name, self.uid, data, src)

    def lend(self, name: str, src: str | os.PathLike[str]) -> tuple[Path, tuple[int, int]]:
        """A copy of ``src`` in the sandbox's folder that stays the judge's, readable only
        (``give``'s ``keep``), and its (device, inode): a library built for the candidate,
        which the sampler calls its own code only while that very file is what is mapped."""
        return _place(self.folder, name, self.uid, None, src, keep=True)

    def send(self, msg: dict) -> None:
        channel.send(self._wfd, msg)

    def recv(self, timeout: float) -> dict | None:
        # a sandbox that died while a process it left holds the pipe: no end of file comes
        if self._eof and not self._pending:
            return None
        return channel.recv(self._rfd, timeout, alive=lambda: self.alive,
                            pending=self._pending)

    def readable(self, timeout: float) -> bool:
        """Whether a whole message (or the pipe's end) is here within ``timeout`` seconds.
        What arrives meanwhile is kept for ``recv``: a reply's first bytes written early (its
        length is known ahead when the candidate pads it) must not end the sampling of a call
        that then goes on computing."""
        end = time.monotonic() + max(0.0, timeout)
        while not (self._eof or channel.complete(self._pending)):
            ready, _, _ = select.select([self._rfd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                return False
            chunk = os.read(self._rfd, 1 << 20)
            if not chunk:
                self._eof = True
            self._pending += chunk
        return True

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_reason(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def strays(self) -> list[int]:
        """Processes the candidate started that are still there (its user's, or its session's)."""
        out = []
        for pid, uid, sid in _processes():
            if pid == self.proc.pid:
                continue
            if (self.uid is not None and uid == self.uid) or sid == self.proc.pid:
                out.append(pid)
        return out

    def frozen(self, wait_s: float = 2.0):
        """Every thread of the candidate's process stopped (SIGSTOP) for the block, continued
        after it. The judge reads a timed call's outputs out of this process's memory after
        its clock has stopped: frozen, nothing the candidate runs (a thread, a signal handler)
        can go on writing them meanwhile, nor hold the read up (a thread holding the memory
        map's lock) while another computes. A thread inside a system call stops as it
        returns from it, before it runs any of its own code again; the block starts once no
        thread is left running or asleep (at most ``wait_s``).

        The stop goes to every thread by name (tgkill), not to the process: a process-wide
        signal is taken by one thread, and where that thread is busy in a long system call
        (``mprotect`` over a GB holds the memory map's lock for tens of milliseconds) the
        others went on computing until it returned. Every other process of the candidate's
        (``strays``) is stopped too: one cloned to share its memory (``CLONE_VM`` without
        ``CLONE_THREAD``) is a process of its own, and went on writing the outputs while
        another held the map's lock through the read."""
        return frozen(self.proc.pid, wait_s, others=self._others)

    def _others(self) -> list[int]:
        """``strays``, quickly where the candidate has a user of its own (one stat per
        process, 0.3 ms for 80 of them; a session's is a file read each, 7 ms): the freeze
        asks before the judge's clock stops. By user alone there: a process that can write
        the candidate's memory is one it cloned, under its user (a set-user-id program it
        runs in its session, which ``strays`` also finds, has memory of its own)."""
        if self.uid is None:
            return self.strays()
        out = []
        for entry in os.scandir("/proc"):
            try:
                if entry.name.isdigit() and entry.stat().st_uid == self.uid \
                        and int(entry.name) != self.proc.pid:
                    out.append(int(entry.name))
            except OSError:
                continue
        return out

    def child_cpu_ticks(self) -> int:
        """CPU time of the children this process waited for (they ran and are gone)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return int(fields[13]) + int(fields[14])
        except (OSError, IndexError, ValueError):
            return 0

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self._log.read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""

    def destroy(self) -> None:
        """Kill everything the candidate started and remove every file it left.

        Where it has a user of its own, that user's every process goes at once
        (``kill_user``), and its compiler's user's too, until none is left: killing by pid
        lost to a chain of processes that each forked the next and exited (a new pid every
        fraction of a millisecond), which lived on beside later candidates."""
        if self.uid is not None and os.geteuid() == 0:
            for _ in range(KILL_ROUNDS):
                kill_user(self.uid)
                kill_user(self.uid + 1)   # the compiler's (a cc1 left by a timed-out build)
                if not _alive_of({self.uid, self.uid + 1}):
                    break
                time.sleep(0.01)
        for _ in range(3):
            victims = [self.proc.pid] + self.strays()
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if not self.strays():
                break
            time.sleep(0.05)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._rfd = self._wfd = -1
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.outputs, ignore_errors=True)
        shutil.rmtree(self.inputs, ignore_errors=True)
        shutil.rmtree(self.staging, ignore_errors=True)
        try:
            self._log.unlink()
        except OSError:
            pass
        if self.uid is not None:   # its compiler's too (uid + 1: verify.Job.build)
            _remove_files_of({self.uid, self.uid + 1})


class Pool:
    """Spare sandboxes for one device; ``take`` hands one out, ``fill`` starts replacements.

    The judge calls ``fill`` after a job, not during it: a spare starting up (importing torch)
    takes CPU time that the candidate's timed calls would otherwise lose to it.
    """

    def __init__(self, device: str, threads: int, spares: int | None = None,
                 memory: Path | None = None):
        if spares is None:
            spares = SPARES["cuda" if device.startswith("cuda") else "cpu"]
        self.device, self.threads, self.spares = device, threads, max(1, spares)
        self.memory = memory   # where sandboxes' outputs and inputs go (None: /dev/shm)
        self._spares: list[Sandbox] = []
        self._zygote: Any = None    # None: not tried yet; False: sandboxes are spawned

    def zygote(self) -> Any:
        """The process sandboxes fork from (where ``FORKED`` says so), or None where they
        are spawned."""
        if self._zygote is None:
            self._zygote = False
            if FORKED["cuda" if self.device.startswith("cuda") else "cpu"]:
                from .zygote import Zygote
                z = Zygote(self.device, lambda folder: sandbox_env(folder, self.threads))
                try:
                    z.wait_ready()
                    self._zygote = z
                except RuntimeError as e:
                    print(f"sandboxes are spawned, not forked: {e}", file=sys.stderr)
                    z.close()
        if self._zygote and not self._zygote.alive:
            self._zygote.close()
            self._zygote = None
            return self.zygote()
        return self._zygote or None

    def _new(self) -> Sandbox:
        box = Sandbox(self.device, self.threads, self.zygote(), self.memory)
        if box.uid is not None and self.memory is not None:
            # the judge's handle kills what these users still run if the judge dies mid-job
            # (a candidate's own children are then nobody's: see ``end_users``)
            try:
                with open(self.memory / USERS_FILE, "a") as f:
                    f.write(f"{box.uid} {box.uid + 1}\n")   # + 1: its compiler's (verify.build)
            except OSError:   # no room left in memory: no candidate without its record
                box.destroy()
                raise
        return box

    def fill(self, at_most: int | None = None) -> None:
        """Start spares until there are ``spares`` (or ``at_most``) of them."""
        self._spares = [s for s in self._spares if s.alive]
        while len(self._spares) < min(self.spares, at_most or self.spares):
            self._spares.append(self._new())

    def settle(self) -> None:
        """Wait until the spares have started, so none starts up during a timing."""
        for s in list(self._spares):
            try:
                s.wait_ready()
            except RuntimeError:   # take() starts another and says why if it fails too
                self._spares.remove(s)

    def take(self) -> Sandbox:
        # with none started, one: two CUDA processes starting side by side each take longer
        # than one (a cold verdict went from 14.9 to 16.4 s). The rest start after the job
        # (``fill``), not during it: a spare starting up beside the candidate's calibration and
        # timing would lengthen the path the judge's clock allows for
        self.fill(at_most=1)
        box = self._spares.pop(0)
        try:
            box.wait_ready()
        except RuntimeError:
            box = self._new()
            box.wait_ready()
        return box

    def close(self) -> None:
        for s in self._spares:
            s.destroy()
        self._spares = []
        if self._zygote:
            self._zygote.close()
        self._zygote = None


_MODE: list[str] = []


def give(folder: Path, name: str, uid: int | None, data: bytes | None = None,
         src: str | os.PathLike[str] | None = None) -> Path:
    """A new file ``name`` in a sandbox's ``folder`` holding ``data`` (or ``src``'s bytes),
    the sandbox's user's (``uid``). That folder is the candidate's to write, and the judge may
    be root: nothing is done there by path once the candidate's code can run. The file is
    made through the folder's descriptor (a name already there, a link among them, is
    refused) and given away through its own: a chown by path after a copy of milliseconds
    followed a link the candidate swapped in meanwhile, and gave it any file of the host's
    (the kernel cache's secret)."""
    return _place(folder, name, uid, data, src, keep=False)[0]


def _place(folder: Path, name: str, uid: int | None, data: bytes | None,
           src: str | os.PathLike[str] | None, keep: bool) -> tuple[Path, tuple[int, int]]:
    """``give``, and the file's (device, inode) taken through its descriptor. ``keep``: the
    file stays the judge's, readable by all and written by none but the judge (a library it
    built: the candidate's own file could be written over with other code, torch.compile's,
    that its samples would then call the candidate's)."""
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     0o644 if keep else 0o600, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        if keep:
            os.fchmod(fd, 0o644)   # past the umask
        elif uid is not None:
            os.fchown(fd, uid, uid)
        st = os.fstat(fd)
        with os.fdopen(os.dup(fd), "wb") as out:
            if src is not None:
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
            else:
                out.write(data or b"")
    finally:
        os.close(fd)
    return folder / name, (st.st_dev, st.st_ino)


@contextlib.contextmanager
def frozen(pid: int, wait_s: float = 2.0, others: Callable[[], list[int]] | None = None):
    """Every thread of process ``pid`` stopped for the block, continued after it
    (``Sandbox.frozen``); with ``others``, every process it names (asked again until all
    are stopped, so one started meanwhile is stopped too). The stop goes to ``pid``'s process
    group first where it leads one (a sandbox's session): every process the candidate started
    that stayed in it stops at once, before ``others`` is asked."""
    try:
        os.killpg(pid, signal.SIGSTOP)
        group = True
    except OSError:
        group = False
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            yield
            return
    pids = {pid}
    try:
        end = time.monotonic() + wait_s
        while True:
            for p in (others() if others is not None else []):
                if p not in pids:
                    pids.add(p)
                    _signal(p, signal.SIGSTOP)
            awake = [(p, tid) for p in pids for tid in _awake(p)]
            if not awake or time.monotonic() > end:
                break
            for p, tid in awake:
                _tgkill(p, tid, signal.SIGSTOP)
            time.sleep(0)
        yield
    finally:
        if group:
            try:
                os.killpg(pid, signal.SIGCONT)
            except OSError:
                pass
        for p in pids:
            _signal(p, signal.SIGCONT)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _awake(pid: int) -> list[int]:
    """The threads of process ``pid`` running or asleep (not stopped, in an uninterruptible
    wait, or gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state in (b"R", b"S"):
            out.append(int(tid))
    return out


_LIBC: list = []


def _tgkill(pid: int, tid: int, sig: int) -> None:
    """A signal to thread ``tid`` of process ``pid`` (glibc's tgkill)."""
    if not _LIBC:
        import ctypes
        _LIBC.append(getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None))
    if _LIBC[0] is not None:
        _LIBC[0](pid, tid, int(sig))


def mode() -> str:
    """How candidates are kept apart here: "user" (a fresh uid per candidate), "user+namespace"
    (the same, in a mount namespace that hides the folders Python lives in from the rest of
    ``/root``), or "same-user" (not root: the caller's user, in a session of its own)."""
    if not _MODE:
        if os.geteuid() != 0:
            _MODE.append("same-user")
        elif not _exposed():
            _MODE.append("user")
        elif shutil.which("unshare"):
            _MODE.append("user+namespace")
        else:
            _MODE.append("same-user")
    return _MODE[0]


ISOLATION = {
    "user": "a user of its own per candidate: it can signal, trace or write nothing outside it",
    "user+namespace": "a user of its own per candidate, in a mount namespace showing it only "
                      "the folders Python needs of those others may not read",
    "same-user": "the caller's user, in a session of its own (not root: a candidate could "
                 "signal, read or write what that user can; see docs/RELIABILITY.md)",
}


def _exposed() -> dict[str, list[str]]:
    """Folders another user cannot enter on the way to what Python needs (the interpreter,
    the standard library, site-packages, this package), with the entries to keep in them."""
    import torch
    needed = {sys.executable, sys.base_prefix, sys.prefix, str(Path(torch.__file__).parent),
              str(Path(__file__).resolve().parents[1]), *[p for p in sys.path if p]}
    out: dict[str, set[str]] = {}
    for p in needed:
        path = Path(p).resolve()
        if not path.exists():
            continue
        for parent in reversed(path.parents):
            if parent == path or parent == Path("/"):
                continue
            try:
                if parent.stat().st_mode & 0o001:
                    continue
            except OSError:
                break
            child = path.relative_to(parent).parts[0]
            out.setdefault(str(parent), set()).add(child)
            break
    return {k: sorted(v) for k, v in out.items()}


def shared_memory() -> Path | None:
    """Where outputs and inputs travel: memory (``/dev/shm``), not the disk, where there is one."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else None


def end_users(memory: Path) -> None:
    """Kill every process of the users a judge's sandboxes had (listed in its folder in
    memory), and remove their files: run by the judge's handle once the judge is gone."""
    uids = recorded_users(memory)
    for uid in uids:
        kill_user(uid)
    _remove_files_of(uids)


def recorded_users(memory: Path) -> set[int]:
    """The users a judge's sandboxes had, from whole records only (a record cut short by a
    full disk must not name another user)."""
    try:
        lines = (memory / USERS_FILE).read_text().splitlines()
    except OSError:
        return set()
    uids: set[int] = set()
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            a, b = int(parts[0]), int(parts[1])
            if b == a + 1 and a >= FIRST_UID:
                uids |= {a, b}
    return uids


def kill_user(uid: int) -> None:
    """Every process of ``uid``, at once: a child takes that user and signals all it may
    (``kill(-1)``), which no process of the user can escape by forking. As root only."""
    if os.geteuid() != 0:
        return
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)   # every process of uid but this one
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _processes() -> list[tuple[int, int, int]]:
    """(pid, uid, session id) of every process."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            sid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[3])
        except (OSError, IndexError, ValueError):
            continue
        out.append((int(entry.name), uid, sid))
    return out


def _alive_of(uids: set[int]) -> bool:
    """Whether a process of one of ``uids`` is still there and not a zombie (one killed and
    not yet reaped by its parent runs nothing)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid not in uids:
                continue
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def _remove_files_of(uids: set[int]) -> None:
    """Every file the users left in a folder anyone may write to, and every SysV IPC object
    they made: no process holds those, and they outlive the job (a shared memory segment of
    GBs keeps its memory from the jobs after)."""
    _remove_ipc_of(uids)
    tops, seen = list(TEMP_DIRS), 0
    while seen < len(tops):
        top, seen = tops[seen], seen + 1
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
                if st.st_uid not in uids:
                    # a folder anyone may write to inside one (/tmp/.X11-unix, a folder made
                    # 1777 by another program) holds what a candidate writes there as well
                    if top in TEMP_DIRS and e.is_dir(follow_symlinks=False) \
                            and st.st_mode & 0o002:
                        tops.append(e.path)
                    continue
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            except OSError:
                pass


def _remove_ipc_of(uids: set[int]) -> None:
    """SysV shared memory segments, message queues and semaphore sets owned or made by
    ``uids`` (listed in /proc/sysvipc), removed (IPC_RMID)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    rmid = {"shm": lambda i: libc.shmctl(i, 0, None), "msg": lambda i: libc.msgctl(i, 0, None),
            "sem": lambda i: libc.semctl(i, 0, 0)}
    for kind, remove in rmid.items():
        try:
            head, *rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except (OSError, ValueError):
            continue
        cols = head.split()
        try:
            at = [cols.index("uid"), cols.index("cuid")]
        except ValueError:
            continue
        for row in rows:
            f = row.split()
            try:
                if any(int(f[c]) in uids for c in at):
                    remove(int(f[1]))   # the id: shmid, msqid or semid
            except (IndexError, ValueError):
                continue
