"""A clean process that forks sandboxes, so torch is imported once and not once per candidate.

Starting ``python -m stitchcuda_lab.verifier.sandbox`` imports torch for every candidate: seconds
of CPU on a small host, paid while the judge waits or, worse, while it times. A fork of a
process that has imported torch already takes milliseconds. The zygote is started as a sandbox
is (the sandbox's environment, nothing of the caller's, a session of its own), imports torch and
the sandbox's module, and then only forks: it runs no torch op (a fork after OpenMP's or CUDA's
start is unsafe), loads no problem and no candidate, and holds no secret, so a child inherits
nothing a spawned sandbox would not have. Each child closes every descriptor but the three it is
given, starts a session of its own, takes its own folder and environment, and runs
``sandbox.main`` as a spawned sandbox does (the change of user comes with its job).

The judge talks to it over a socket pair: ``spawn`` (with the child's pipes and log as
descriptors) answers the child's pid; ``status`` answers its exit code once the zygote has
reaped it (as ``Popen.returncode``: negative for a signal). Used for CPU sandboxes, and for
CUDA ones where ``pool.FORKED`` says so: no CUDA call is made here, each child starts its own
context.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 16384, 1 << 18
START_TIMEOUT = 120.0


class Zygote:
    """The judge's handle on a zygote process (``start`` it, then ``spawn`` children)."""

    def __init__(self, device: str, env: Callable[[Path], dict[str, str]]):
        """``env(folder)``: the environment of a sandbox whose folder is ``folder``."""
        import tempfile
        self.device = device
        self.folder = Path(tempfile.mkdtemp(prefix="stitch_zygote_"))
        os.chmod(self.folder, 0o700)
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        log = os.open(self.folder / "zygote.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                      | os.O_NOFOLLOW, 0o600)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "stitchcuda_lab.verifier.zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env(self.folder),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=str(self.folder))
        finally:
            os.close(log)
            theirs.close()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        reply = self._recv(timeout)
        if not reply.get("ready"):
            raise RuntimeError(f"the zygote did not start: {self.log_tail()}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, *, env: dict[str, str], cwd: str, fds: tuple[int, int, int],
              expose: dict | None) -> Forked:
        """A sandbox forked from here: ``fds`` are its command pipe, its reply pipe, its log."""
        with self._lock:
            msg = json.dumps({"op": "spawn", "env": env, "cwd": cwd, "device": self.device,
                              "expose": expose}).encode()
            socket.send_fds(self._sock, [msg], list(fds))
            reply = self._recv(30.0)
        if "pid" not in reply:
            raise RuntimeError(f"the zygote could not fork a sandbox: {reply.get('error')}")
        return Forked(self, int(reply["pid"]))

    def status(self, pid: int) -> int | None:
        """The child's exit code once it has ended, None while it runs."""
        if self.alive:
            try:
                with self._lock:
                    self._sock.send(json.dumps({"op": "status", "pid": pid}).encode())
                    reply = self._recv(10.0)
                return reply.get("code")
            except (OSError, RuntimeError):
                pass
        # the zygote is gone, and its children with it (they die with their parent)
        return None if Path(f"/proc/{pid}").exists() else -signal.SIGKILL

    def _recv(self, timeout: float) -> dict:
        ready, _, _ = select.select([self._sock], [], [], timeout)
        if not ready:
            raise RuntimeError("the zygote did not answer")
        data = self._sock.recv(1 << 16)
        if not data:
            raise RuntimeError("the zygote is gone")
        return json.loads(data)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return (self.folder / "zygote.log").read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._sock.close()
        import shutil
        shutil.rmtree(self.folder, ignore_errors=True)


class Forked:
    """A forked sandbox, with the part of ``subprocess.Popen`` the pool uses."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired("sandbox", timeout or 0.0)
            time.sleep(0.01)
        return self.returncode   # type: ignore[return-value]


# -- the zygote process --

def _child(req: dict, fds: list[int], sock: socket.socket) -> None:
    """In the forked child: become a fresh sandbox, then run it (never returns)."""
    code = 0
    try:
        sock.close()
        to_r, from_w, log = fds
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for fd in _open_fds():
            if fd not in (0, 1, 2, to_r, from_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile
        tempfile.tempdir = None      # the zygote's, cached: the child's TMPDIR from now on
        if req.get("expose"):        # what `unshare --mount --propagation private` does
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(
                    b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "a mount namespace of its own")
        from . import sandbox
        # what a spawned sandbox's process shows of itself
        sys.argv = [sandbox.__file__, req["device"], str(to_r), str(from_w)] + (
            [json.dumps(req["expose"])] if req.get("expose") else [])
        sandbox.main(req["device"], to_r, from_w, req.get("expose"))
    except BaseException:  # noqa: BLE001  (said in the sandbox's log, then exit)
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def _serve(sock: socket.socket) -> None:
    ended: dict[int, int] = {}
    children: set[int] = set()
    while True:
        ready, _, _ = select.select([sock], [], [], 0.05)
        while children:   # reap
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            ended[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else \
                os.WEXITSTATUS(status)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except OSError:
            return
        if not data:
            return    # the judge is gone
        req: dict[str, Any] = json.loads(data)
        if req.get("op") == "status":
            pid = int(req.get("pid", 0))
            sock.send(json.dumps({"code": ended.get(pid) if pid not in children
                                  else None}).encode())
            continue
        if req.get("op") != "spawn" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"error": "a spawn needs its three descriptors"}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req, fds, sock)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        sock.send(json.dumps({"pid": pid}).encode())


def main(fd: int) -> None:
    from . import channel
    channel.die_with_parent()
    sock = socket.socket(fileno=fd)
    # asking whether CUDA is there (torch.cuda.is_available, device_count) would start the
    # driver, which a forked child cannot use; NVML answers instead, and is_initialized
    # below sees any CUDA call made in spite of it
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch  # noqa: F401  (what every child needs, imported once; no op runs here)
    import torch._dynamo  # noqa: F401  (the profiler's first start imports it: seconds)

    from . import sandbox  # noqa: F401
    if torch.cuda.is_initialized():   # a child could not start CUDA of its own
        raise RuntimeError("CUDA was started in the zygote; its children cannot use it")
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    _serve(sock)


if __name__ == "__main__":
    main(int(sys.argv[1]))
