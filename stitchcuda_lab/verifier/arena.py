"""CUDA: a timed call's outputs and inputs, taken into the judge's own memory as the call answers.

The sandbox is the candidate's process. Whatever it keeps of a timed call until the judge
picks the calls it checks, the candidate can rewrite: a forward that computes nothing, and an
``outputs`` handler (found with ``gc``) that computes only the picked calls' outputs, outside
every clock, passed. On the CPU the judge pins each call's output file, or reads it out of the
frozen process, before its clock stops (exchange.py). On CUDA it is this arena: device memory
the sandbox makes with the driver's virtual memory API before any candidate code is loaded
(``cuMemCreate``, exportable as a file descriptor) and sends over a Unix socket the judge
listens on in the sandbox's own folder (``SCM_RIGHTS``; the judge accepts only the sandbox's
process, by ``SO_PEERCRED``); the judge imports it and maps it for reading. After every
timed call the sandbox copies the call's outputs and its inputs as the call left them into
it, synchronises, and answers; the judge copies them out at once
(``Mapped.take``), device to device, before its next command. What the candidate writes there
later reaches nothing the judge reads.

Why this way: the older IPC handles (``cuIpcGetMemHandle``) cannot cross users (a process
that took another uid failed to open the judge's handle on the H200, and the driver checks
the two processes' uid or pid), and reading through one is undefined once the exporter frees
the memory. An imported descriptor is a reference of the judge's own: the memory lives until
the judge lets it go, and the judge maps exactly the size it asked for (the driver refuses a
larger one). Driver calls go through ``ctypes`` on ``libcuda``.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import socket
import struct
import time
from typing import Any

ALIGN = 256          # each tensor's place in the arena starts on this boundary
MAX_TENSORS = 512    # outputs and inputs of one call, together
MAX_DIMS = 64        # an entry's shape, before its elements are counted
POSIX_FD = 1         # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
PINNED = 1           # CU_MEM_ALLOCATION_TYPE_PINNED
ON_DEVICE = 1        # CU_MEM_LOCATION_TYPE_DEVICE
READ, READ_WRITE = 1, 3   # CU_MEM_ACCESS_FLAGS_PROT_*


class ArenaError(RuntimeError):
    """The arena cannot be made or mapped here (no driver, no VMM export, refused, ...)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):   # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", _Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_DRIVER: list = []


def _driver() -> Any:
    if not _DRIVER:
        try:
            _DRIVER.append(ctypes.CDLL("libcuda.so.1"))
        except OSError as e:
            raise ArenaError(f"the CUDA driver library cannot be loaded ({e})") from None
    return _DRIVER[0]


def _call(name: str, *args: Any) -> None:
    f = getattr(_driver(), name, None)
    if f is None:
        raise ArenaError(f"the CUDA driver has no {name}")
    rc = f(*args)
    if rc != 0:
        err = ctypes.c_char_p()
        with contextlib.suppress(Exception):
            _driver().cuGetErrorName(rc, ctypes.byref(err))
        raise ArenaError(f"{name} failed: {err.value.decode() if err.value else rc}")


def _device_index(device: str) -> int:
    """torch's primary context made current on this thread (the driver API needs one); the
    device's ordinal ("cuda" alone is the current device)."""
    import torch
    idx = torch.device(device).index
    idx = torch.cuda.current_device() if idx is None else idx
    torch.cuda.set_device(idx)
    torch.cuda.synchronize()
    return idx


def _prop(index: int) -> _Prop:
    prop = _Prop()
    prop.type, prop.requestedHandleTypes = PINNED, POSIX_FD
    prop.location.type, prop.location.id = ON_DEVICE, index
    return prop


def granular(nbytes: int, device: str) -> int:
    """``nbytes`` rounded up to what the driver allocates in (2 MiB on current GPUs)."""
    g = ctypes.c_size_t(0)
    _call("cuMemGetAllocationGranularity", ctypes.byref(g), ctypes.byref(
        _prop(_device_index(device))), ctypes.c_int(0))
    step = max(1, g.value)
    return -(-max(ALIGN, nbytes) // step) * step


def view(ptr: int, nbytes: int, device: str) -> Any:
    """A uint8 tensor over ``nbytes`` of device memory at ``ptr`` (no copy)."""
    import torch

    class _Raw:
        __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                    "version": 2, "strides": None}
    return torch.as_tensor(_Raw(), device=device)


def memory_order(t: Any) -> list[int] | None:
    """The dims of a dense tensor that is not contiguous, outermost in memory first (a
    channels-last NCHW tensor: [0, 2, 3, 1]), such that ``t.permute(order)`` is contiguous;
    None where ``t`` is contiguous already, or is not dense (a view with gaps, an expanded
    one): those are copied through ``contiguous()``."""
    if t.is_contiguous() or t.is_conj() or t.is_neg():
        return None   # (a lazy conjugate or negation is made real by contiguous())
    # size-1 dims go first: their strides say nothing about where elements lie. Sorted so,
    # the permuted view is contiguous exactly where the tensor is dense
    order = sorted(range(t.dim()), key=lambda d: (t.shape[d] != 1, -t.stride(d)))
    return order if t.permute(order).is_contiguous() else None


def in_logical_order(raw: Any, shape: list[int], dtype: str, order: list[int]) -> Any:
    """The bytes of a tensor laid out in ``order`` (``memory_order``), rearranged into its
    contiguous layout: a new uint8 tensor. Bytes are moved, each element's as one row, so no
    dtype's own copy runs (a quantized dtype named by a forged entry has none)."""
    import torch
    if raw.numel() == 0:
        return raw.clone()
    size = getattr(torch, dtype).itemsize
    lay = raw.reshape([shape[d] for d in order] + [size])
    back = [order.index(d) for d in range(len(order))] + [len(order)]
    return lay.permute(back).contiguous().reshape(-1)


def size_for(tensor_bytes: list[int]) -> int:
    """Arena bytes that hold tensors of these sizes, each on an ``ALIGN`` boundary."""
    return sum(-(-max(1, n) // ALIGN) * ALIGN for n in tensor_bytes)


class _Memory:
    """Device memory from an allocation handle: reserved, mapped, given access, and undone."""

    def __init__(self, handle: int, nbytes: int, index: int, access: tuple[int, ...]):
        self.handle, self.nbytes, self.ptr = handle, nbytes, ctypes.c_uint64(0)
        self.mapped, self.access = False, 0
        try:
            _call("cuMemAddressReserve", ctypes.byref(self.ptr), ctypes.c_size_t(nbytes),
                  ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0))
            _call("cuMemMap", self.ptr, ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                  ctypes.c_uint64(handle), ctypes.c_uint64(0))
            self.mapped = True
            for i, flags in enumerate(access):   # the first the driver accepts
                desc = _Access()
                desc.location.type, desc.location.id, desc.flags = ON_DEVICE, index, flags
                try:
                    _call("cuMemSetAccess", self.ptr, ctypes.c_size_t(nbytes),
                          ctypes.byref(desc), ctypes.c_size_t(1))
                    self.access = flags
                    break
                except ArenaError:
                    if i == len(access) - 1:
                        raise
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Each step on its own: one that fails does not keep the others from running."""
        if self.mapped:
            with contextlib.suppress(ArenaError):
                _call("cuMemUnmap", self.ptr, ctypes.c_size_t(self.nbytes))
        if self.ptr.value:
            with contextlib.suppress(ArenaError):
                _call("cuMemAddressFree", self.ptr, ctypes.c_size_t(self.nbytes))
        if self.handle:
            with contextlib.suppress(ArenaError):
                _call("cuMemRelease", ctypes.c_uint64(self.handle))
        self.mapped, self.ptr, self.handle = False, ctypes.c_uint64(0), 0


class Arena:
    """Sandbox side: the memory, the descriptor it is exported as (``fd``) and ``put``."""

    end = 0   # where the last ``put`` stopped: the next one ``after`` it starts there

    def __init__(self, nbytes: int, device: str):
        index = _device_index(device)
        self.device, self.nbytes = device, granular(int(nbytes), device)
        handle = ctypes.c_uint64(0)
        _call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(self.nbytes),
              ctypes.byref(_prop(index)), ctypes.c_uint64(0))
        self.memory = _Memory(handle.value, self.nbytes, index, (READ_WRITE,))
        self.fd, self.end = -1, 0
        try:
            fd = ctypes.c_int(-1)
            _call("cuMemExportToShareableHandle", ctypes.byref(fd),
                  ctypes.c_uint64(handle.value), ctypes.c_int(POSIX_FD), ctypes.c_uint64(0))
            self.fd = fd.value
            self.whole = view(self.memory.ptr.value, self.nbytes, device)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Given up (the judge could not use it): the memory and the descriptor let go."""
        self.whole = None
        self.memory.release()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def put(self, groups: list[list], after: bool = False) -> list[list[dict]]:
        """Each group's tensors (a call's outputs, its inputs) copied in one after another,
        from the arena's start or, ``after``, past what the last ``put`` placed; their
        entries, per group. One that does not fit is an entry that says so."""
        import torch
        at = self.end if after else 0
        placed = []
        for tensors in groups:
            entries: list[dict] = []
            for t in tensors:
                order = memory_order(t)
                # in the order its elements lie (a channels-last output is copied as one
                # block, not permuted into a temporary first: the permute is the judge's, off
                # the clock, where it cost an honest channels-last program 5 ms a call)
                dense = t.detach().permute(order) if order else t.detach().contiguous()
                flat = dense.reshape(-1).view(torch.uint8)
                n = flat.numel()
                if at + n > self.nbytes:
                    entries.append({"error": f"a tensor of {n} bytes past the arena's "
                                             f"{self.nbytes} (larger than the reference's)"})
                    continue
                if n:
                    self.whole[at:at + n].copy_(flat)
                entries.append({"at": at, "nbytes": n, "shape": list(t.shape),
                                "dtype": str(t.dtype).replace("torch.", ""),
                                **({"order": order} if order else {})})
                at += -(-max(1, n) // ALIGN) * ALIGN
            placed.append(entries)
        self.end = at
        return placed


class Mapped:
    """Judge side: the sandbox's arena imported and mapped here for reading; ``take`` copies a
    call's tensors out."""

    def __init__(self, fd: int, nbytes: int, device: str):
        """``fd``: the judge's own descriptor of the sandbox's memory (``receive_fd``), closed
        here once imported."""
        self.memory: _Memory | None = None
        try:
            if not (isinstance(nbytes, int) and 0 < nbytes < 1 << 50):
                raise ArenaError("a malformed arena size")
            index = _device_index(device)
            self.device, self.nbytes = device, nbytes
            handle = ctypes.c_uint64(0)
            _call("cuMemImportFromShareableHandle", ctypes.byref(handle),
                  ctypes.c_void_p(fd), ctypes.c_int(POSIX_FD))
        finally:
            os.close(fd)
        try:   # the size the sandbox named: mapping more than the allocation holds is refused
            # Read-only where the driver maps device memory so; else read-write (the judge's
            # own access is no boundary: what the sandbox can do to the memory is the same).
            self.memory = _Memory(handle.value, nbytes, index, (READ, READ_WRITE))
            self.whole = view(self.memory.ptr.value, nbytes, device)
        except BaseException:
            self.close()
            raise

    def take(self, entries: Any, copy: bool = True) -> list:
        """The tensors a reply says it put in the arena, copied out now as ``Pinned``
        outputs (exchange.read_output reads them as any other); a malformed entry becomes a
        ``Pinned`` that says so. Synchronised before it returns: the next call writes over
        the arena. ``copy`` False: views of the arena itself where the layout allows, for
        a reader done with them before the next command (what the candidate writes there
        meanwhile can change only what is read of its own outputs)."""
        import torch

        from .exchange import Pinned
        if not isinstance(entries, list) or len(entries) > MAX_TENSORS:
            return [Pinned([], "", "protocol: a timed call's reply without its arena entries")]
        out = []
        total = 0   # what one call's entries copy out, together: no more than the arena holds
        for e in entries:
            bad = self.bad_entry(e)
            if not bad:
                total += e["nbytes"]
                if total > self.nbytes:
                    bad = "protocol: arena entries larger together than the arena"
            if bad:
                out.append(Pinned([], "", bad))
                continue
            raw = self.whole[e["at"]:e["at"] + e["nbytes"]]
            raw = in_logical_order(raw, e["shape"], e["dtype"], e["order"]) \
                if e.get("order") else raw.clone() if copy else raw
            out.append(Pinned(list(e["shape"]), str(e["dtype"]), host=raw))
        if self.whole.is_cuda:
            torch.cuda.current_stream(self.whole.device).synchronize()
        return out

    def bad_entry(self, e: Any) -> str:
        import torch
        if not isinstance(e, dict):
            return "protocol: an arena entry that is not one"
        if "error" in e:   # the sandbox could not place it (larger than the arena)
            return f"output_count: {str(e['error'])[:200]}"
        at, nbytes, shape = e.get("at"), e.get("nbytes"), e.get("shape")
        if not (isinstance(at, int) and isinstance(nbytes, int) and isinstance(shape, list)
                and len(shape) <= MAX_DIMS
                and all(isinstance(d, int) and 0 <= d < 1 << 48 for d in shape)):
            return "protocol: an arena entry without its place, size or shape"
        if at < 0 or nbytes < 0 or at % ALIGN or at + nbytes > self.nbytes:
            return "protocol: an arena entry outside the arena"
        dtype = getattr(torch, str(e.get("dtype")), None)
        if not isinstance(dtype, torch.dtype) or dtype.itemsize * math.prod(shape) != nbytes:
            return "protocol: an arena entry whose size is not its shape's"
        order = e.get("order")
        if order is not None and not (isinstance(order, list) and len(order) == len(shape)
                                      and all(type(d) is int for d in order)
                                      and sorted(order) == list(range(len(shape)))):
            return "protocol: an arena entry whose order is not a permutation of its dims"
        return ""

    def close(self) -> None:
        """The mapping and the judge's reference let go (the memory goes with the last)."""
        self.whole = None
        if self.memory is not None:
            self.memory.release()
            self.memory = None


def listen(path: str, uid: int | None = None) -> socket.socket:
    """Judge side: a Unix socket at ``path`` (in the sandbox's own folder, which no other
    candidate's user can enter: a name in the abstract namespace is listed in /proc/net/unix,
    and any process could fill its backlog), connectable by ``uid`` alone."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        if uid is not None:
            os.chown(path, uid, uid)
        sock.listen(1)
    except BaseException:
        sock.close()
        raise
    return sock


def receive_fd(sock: socket.socket, pid: int, timeout: float = 10.0) -> int:
    """Judge side: the one descriptor process ``pid`` sent over ``sock``; a connection from any
    other process is refused by its peer's pid before a byte is read."""
    deadline = time.monotonic() + timeout   # however many others connect meanwhile
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ArenaError("the sandbox did not send the arena (timed out)")
        sock.settimeout(left)
        try:
            conn, _ = sock.accept()
        except OSError as e:
            raise ArenaError(f"the sandbox did not send the arena ({e})") from None
        with conn:
            cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                   struct.calcsize("3i"))
            if struct.unpack("3i", cred)[0] != pid:
                continue
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                _, fds, _, _ = socket.recv_fds(conn, 16, 4)
            except OSError as e:
                raise ArenaError(f"the arena's descriptor did not arrive ({e})") from None
            for extra in fds[1:]:
                os.close(extra)
            if not fds:
                raise ArenaError("the sandbox sent no descriptor")
            return fds[0]


def send_fd(path: str, fd: int, timeout: float = 10.0) -> None:
    """Sandbox side: ``fd`` to the judge's socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        socket.send_fds(sock, [b"a"], [fd])
