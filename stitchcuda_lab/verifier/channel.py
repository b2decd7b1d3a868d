"""Length-prefixed JSON messages on a pair of pipe file descriptors.

Both ends of every Verifier process pair speak it: the caller and the judge, the judge and a
candidate's sandbox. A message is 8 bytes of little-endian length, then that many bytes of
JSON. The reading side never trusts the other: a frame over ``MAX_MESSAGE`` bytes or one that
is not a JSON object is a ``ProtocolError`` (a sandbox that wrote it is "protocol_tampering").
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Any

MAX_MESSAGE = 64 * 1024 * 1024


class ProtocolError(Exception):
    """The other side sent something that is not a message of this protocol."""


def die_with_parent() -> None:
    """Let the kernel kill this process when the thread that started it ends.

    For sandboxes, whose parent is the judge's main thread: a sandbox whose judge is gone
    would otherwise go on computing on the GPU for nobody. Set again after a change of user
    (the kernel clears it then). The judge itself uses ``exit_with_parent``: its caller may
    start it from a thread that ends long before the caller does.
    """
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:   # the parent went before the call above took effect
        os._exit(1)


def exit_with_parent(every: float = 1.0) -> None:
    """Exit (taking the sandboxes with it, see ``die_with_parent``) once the parent process
    is gone: a judge killed with its caller, say past a bench's timeout."""
    import threading
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="stitch-parent-watch", daemon=True).start()


def send(fd: int, obj: dict) -> None:
    data = json.dumps(obj, default=_json_default).encode()
    os.write(fd, struct.pack("<Q", len(data)))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def recv(fd: int, timeout: float = math.inf,
         alive: Callable[[], bool] | None = None,
         pending: bytearray | None = None) -> dict | None:
    """One message, or None on EOF (the other side died) or when ``timeout`` passes.

    ``alive``: whether the writer still runs, asked while nothing arrives. A process that
    exits while another (a child it left behind) holds the pipe open sends no end of file:
    without it the reader would wait out ``timeout``. ``pending``: bytes read from ``fd``
    before (``complete``), taken first."""
    deadline = time.monotonic() + timeout
    head = read_exact(fd, 8, deadline, alive, pending)
    if head is None:
        return None
    (n,) = struct.unpack("<Q", head)
    if n > MAX_MESSAGE:
        raise ProtocolError(f"a frame of {n} bytes (at most {MAX_MESSAGE})")
    body = read_exact(fd, n, deadline, alive, pending)
    if body is None:   # a frame cut short: the other side stalled or died mid-message
        raise ProtocolError(f"a frame of {n} bytes cut short")
    try:
        msg = json.loads(body)
    except ValueError:
        raise ProtocolError("a frame that is not JSON") from None
    if not isinstance(msg, dict):
        raise ProtocolError("a frame that is not a JSON object")
    return msg


def complete(pending: bytearray) -> bool:
    """Whether ``pending`` holds a whole frame (or a header no frame may have)."""
    if len(pending) < 8:
        return False
    (n,) = struct.unpack("<Q", bytes(pending[:8]))
    return n > MAX_MESSAGE or len(pending) >= 8 + n


def read_exact(fd: int, n: int, deadline: float,
               alive: Callable[[], bool] | None = None,
               pending: bytearray | None = None) -> bytes | None:
    buf = bytearray()
    if pending:
        buf += pending[:n]
        del pending[:n]
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], min(left, 0.5 if alive else 1.0))
        if not ready:
            if alive is not None and not alive():
                # what it wrote before it went is read first (select says so); nothing is left
                ready, _, _ = select.select([fd], [], [], 0)
                if not ready:
                    return None
            continue
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _json_default(o: Any) -> Any:
    try:
        f = float(o)
        return None if math.isnan(f) else f
    except (TypeError, ValueError):
        return str(o)
