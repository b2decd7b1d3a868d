"""CUDA: a timed call's outputs and inputs, taken into the judge's own memory as the call answers.

The sandbox is the candidate's process. Whatever it keeps of a timed call until the judge
picks the calls it checks, the candidate can rewrite: a forward that computes nothing, and an
``outputs`` handler (found with ``gc``) that computes only the picked calls' outputs, outside
every clock, passed. On the CPU the judge pins each call's output file, or reads it out of the
frozen process, before its clock stops (exchange.py). On CUDA it is this arena: one device
allocation the sandbox makes (``cuMemAlloc``, not torch's caching allocator) and exports with
CUDA IPC before any candidate code is loaded; the judge maps it. After every timed call the
sandbox copies the call's outputs and its inputs as the call left them into it, synchronises,
and answers; the judge copies them out at once (``Mapped.take``), device to device, before its
next command. What the candidate writes there later reaches nothing the judge reads.

The sandbox exports and the judge maps, not the other way: a process that took another uid
cannot open the judge's handle (``cudaErrorMapBufferObjectFailed`` on the H200), and the judge
only ever reads through its mapping, within the allocation's size as the driver reports it
(``cuMemGetAddressRange``), never the size the sandbox claims. Driver calls go through
``ctypes`` on ``libcuda``; the handle's 64 bytes travel as hex in the channel's JSON.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

ALIGN = 256          # each tensor's place in the arena starts on this boundary
HANDLE_BYTES = 64    # CU_IPC_HANDLE_SIZE
LAZY_PEER = 1        # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class ArenaError(RuntimeError):
    """The arena cannot be made or mapped here (no driver, IPC refused across users, ...)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


_DRIVER: list = []


def _driver() -> Any:
    if not _DRIVER:
        try:
            _DRIVER.append(ctypes.CDLL("libcuda.so.1"))
        except OSError as e:
            raise ArenaError(f"the CUDA driver library cannot be loaded ({e})") from None
    return _DRIVER[0]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        try:
            _driver().cuGetErrorName(rc, ctypes.byref(name))
        except Exception:  # noqa: BLE001  (the code alone still says it)
            pass
        raise ArenaError(f"{what} failed: {name.value.decode() if name.value else rc}")


def _fn(*names: str) -> Any:
    """The first of ``names`` the driver exports (``_v2`` entry points where there are)."""
    lib = _driver()
    for n in names:
        f = getattr(lib, n, None)
        if f is not None:
            return f
    raise ArenaError(f"the CUDA driver exports none of {', '.join(names)}")


def _current_context(device: str) -> None:
    """torch's primary context made current on this thread (the driver API needs one)."""
    import torch
    torch.cuda.set_device(torch.device(device))
    torch.cuda.synchronize()


def view(ptr: int, nbytes: int, device: str) -> Any:
    """A uint8 tensor over ``nbytes`` of device memory at ``ptr`` (no copy)."""
    import torch

    class _Raw:
        __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                    "version": 2, "strides": None}
    return torch.as_tensor(_Raw(), device=device)


def size_for(tensor_bytes: list[int]) -> int:
    """Arena bytes that hold tensors of these sizes, each on an ``ALIGN`` boundary."""
    return sum(-(-max(1, n) // ALIGN) * ALIGN for n in tensor_bytes)


class Arena:
    """Sandbox side: the allocation, its IPC handle (``handle_hex``) and ``put``."""

    def __init__(self, nbytes: int, device: str):
        _current_context(device)
        self.device, self.nbytes = device, max(ALIGN, int(nbytes))
        self.ptr = ctypes.c_uint64(0)
        _check(_fn("cuMemAlloc_v2", "cuMemAlloc")(ctypes.byref(self.ptr),
                                                   ctypes.c_size_t(self.nbytes)), "cuMemAlloc")
        h = _Handle()
        _check(_fn("cuIpcGetMemHandle")(ctypes.byref(h), self.ptr), "cuIpcGetMemHandle")
        self.handle_hex = ctypes.string_at(ctypes.addressof(h), HANDLE_BYTES).hex()
        self.whole = view(self.ptr.value, self.nbytes, device)

    def put(self, groups: list[list]) -> list[list[dict]]:
        """Each group's tensors (a call's outputs, its inputs) copied in one after another;
        their entries, per group. One that does not fit is an entry that says so."""
        import torch
        at = 0
        placed = []
        for tensors in groups:
            entries: list[dict] = []
            for t in tensors:
                flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
                n = flat.numel()
                if at + n > self.nbytes:
                    entries.append({"error": f"a tensor of {n} bytes past the arena's "
                                             f"{self.nbytes} (larger than the reference's)"})
                    continue
                if n:
                    self.whole[at:at + n].copy_(flat)
                entries.append({"at": at, "nbytes": n, "shape": list(t.shape),
                                "dtype": str(t.dtype).replace("torch.", "")})
                at += -(-max(1, n) // ALIGN) * ALIGN
            placed.append(entries)
        return placed


MAX_TENSORS = 512   # outputs and inputs of one call, together


class Mapped:
    """Judge side: the sandbox's arena mapped here; ``take`` copies a call's tensors out."""

    def __init__(self, handle_hex: str, device: str):
        raw = bytes.fromhex(handle_hex)
        if len(raw) != HANDLE_BYTES:
            raise ArenaError("a malformed arena handle")
        _current_context(device)
        h = _Handle.from_buffer_copy(raw)
        self.device = device
        self.ptr = ctypes.c_uint64(0)
        _check(_fn("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")(
            ctypes.byref(self.ptr), h, ctypes.c_uint(LAZY_PEER)), "cuIpcOpenMemHandle")
        try:   # the allocation's size as the driver has it: all the judge ever reads
            base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
            _check(_fn("cuMemGetAddressRange_v2", "cuMemGetAddressRange")(
                ctypes.byref(base), ctypes.byref(size), self.ptr), "cuMemGetAddressRange")
            self.nbytes = int(size.value) - (self.ptr.value - base.value)
            if self.nbytes <= 0:
                raise ArenaError("the mapped arena is empty")
            self.whole = view(self.ptr.value, self.nbytes, device)
        except BaseException:
            self.close()
            raise

    def take(self, entries: Any) -> list:
        """The tensors a reply says it put in the arena, copied out now as ``Pinned``
        outputs (exchange.read_output reads them as any other); a malformed entry becomes a
        ``Pinned`` that says so. Synchronised before it returns: the next call writes over
        the arena."""
        import torch

        from .exchange import Pinned
        if not isinstance(entries, list) or len(entries) > MAX_TENSORS:
            return [Pinned([], "", "protocol: a timed call's reply without its arena entries")]
        out = []
        for e in entries:
            bad = self.bad_entry(e)
            if bad:
                out.append(Pinned([], "", bad))
                continue
            raw = self.whole[e["at"]:e["at"] + e["nbytes"]].clone()
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
                and all(isinstance(d, int) and d >= 0 for d in shape)):
            return "protocol: an arena entry without its place, size or shape"
        if at < 0 or nbytes < 0 or at % ALIGN or at + nbytes > self.nbytes:
            return "protocol: an arena entry outside the arena"
        dtype = getattr(torch, str(e.get("dtype")), None)
        if not isinstance(dtype, torch.dtype) or dtype.itemsize * math.prod(shape) != nbytes:
            return "protocol: an arena entry whose size is not its shape's"
        return ""

    def close(self) -> None:
        """The mapping let go (the sandbox's allocation goes with its process)."""
        self.whole = None
        if self.ptr.value:
            try:
                _fn("cuIpcCloseMemHandle")(self.ptr)
            finally:
                self.ptr = ctypes.c_uint64(0)
