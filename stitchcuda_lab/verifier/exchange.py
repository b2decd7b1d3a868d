"""What crosses between the judge and a candidate's sandbox: seeds in, output bytes out.

Inputs never travel. Both sides draw them from the problem's ``get_inputs()`` under the same
seed, on the same device, with the same code (``draw``): the judge for the reference, the
sandbox for the candidate. The seed reaches the sandbox only with the call that uses it, so a
candidate cannot tabulate answers ahead, and a candidate that tampers with its own drawing only
gets its own answers wrong. Outputs travel as raw bytes in files the sandbox writes into its
own folder; the judge reads them with ``O_NOFOLLOW``, exactly as many bytes as the reference's
output of that shape and dtype holds, and copies them before comparing.

A CPU timed call is the exception both ways, because its path lies inside the judge's clock
(less the path's cost, calibrated on the reference): the judge draws its inputs and the
sandbox maps their files (``map_inputs``), and the judge reads its outputs straight out of the
sandbox's memory (``peek_output``). No pass over the bytes is left in the candidate's process
for it to rewrite into compute hidden in the calibrated path.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import random
import re
import stat
from pathlib import Path
from typing import Any

def seed_all(seed: int) -> None:
    """Seed every generator ``get_inputs()`` may use: a forward's (``seed_forward``), and
    numpy's."""
    seed_forward(seed)
    try:
        import numpy as np
        np.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


def forward_seed(key: bytes, seed: int) -> int:
    """The seed a forward on the draw of ``seed`` starts from, on both sides: the judge seeds
    the forward's generators with it just before its reference's forward, the sandbox just
    before the candidate's (``reseed``), so a forward that draws random numbers
    (training-mode dropout, left to PyTorch) draws the same ones wherever its inputs were
    drawn. Keyed by a secret of the judge's: it says nothing of ``seed``."""
    digest = hashlib.blake2b(str(seed).encode(), key=key, digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def seed_forward(seed: int) -> None:
    """Seed the generators a forward draws from: torch's (CPU and CUDA) and Python's. Not
    numpy's, whose code in a candidate's timed call is another package's to the sampler."""
    import torch
    torch.manual_seed(seed)
    random.seed(seed)


def reseed(cmd: dict) -> None:
    """The forward's generators seeded as the command says (its ``rng``), if it says."""
    if cmd.get("rng") is not None:
        seed_forward(int(cmd["rng"]))


def draw(prob: Any, device: str, seed: int) -> list:
    """``get_inputs()`` under ``seed``, new tensors made on ``device`` directly.

    Drawing tens of MB on the host and copying them over costs more than the whole check on a
    GPU; tensors the problem pins to a device explicitly are moved afterwards.
    """
    from ..problem import draw_on
    return draw_on(prob.get_inputs, device, lambda: seed_all(seed))


# Ways to take a problem's inputs out of the range get_inputs() draws from, exactly: a power of
# two and a sign change round nothing, so the reference is as well defined on them as on the
# draw. The judge tries them in this order and uses the first on which the reference stays
# finite (log or sqrt of torch.rand's draws refuse a sign change, not a doubling).
WIDEN = {"-2x": -2.0, "2x": 2.0, "-x": -1.0,
         # far: a program right only near the draw's range (a polynomial good to |x| = 2, a
         # series for log good from 1/2 on) is wrong here; powers of two scale exactly
         "16x": 16.0, "-16x": -16.0, "x/16": 1 / 16, "-x/16": -1 / 16,
         # far both ways at once: each element times one of these (drawn per element); 64x
         # takes randn's draws past exp's overflow (88.7): a softmax that skips its max
         # subtraction is right on every draw and on 16x (candidates/range_softmax_without_max.py)
         "64x|16x|x/16": (64.0, 16.0, 1 / 16), "-64x|-16x|-x/16": (-64.0, -16.0, -1 / 16),
         # integer tensors (not bool), where no floating one is drawn: a kernel that saturates
         # or narrows where PyTorch wraps is wrong there (products wrap as PyTorch's do)
         "2x int": 2, "-2x int": -2}
NEAR = ("-2x", "2x", "-x", "2x int", "-2x int")   # the range trial's, in this order: the first
FAR = (("64x|16x|x/16", "-64x|-16x|-x/16"),         # that suits; the far trials', the first
       ("16x", "-16x", "x/16", "-x/16"))           # group's sign opposite in the two
SMALL = ("x/16", "-x/16")                           # the small trial's: whole, either sign


def scales(x: Any, how: str) -> bool:
    """Whether ``widen(..., how)`` scales tensor ``x``: floating and complex ones, or (the
    ``int`` ways) integer ones."""
    import torch
    if not isinstance(x, torch.Tensor):
        return False
    if how.endswith(" int"):
        return not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)
    return x.is_floating_point() or x.is_complex()


# How much of a tensor a widened draw scales: all of it, or a few elements at random places
# (drawn from the call's seed, so the judge and a sandbox that draws for itself agree). A few
# elements defeat a guard that samples the input to tell widened draws from plain ones (every
# element of a plain draw is in range, and every one of a draw scaled whole is out of it:
# candidates/range_sampled_guard.py); scaling all of them still catches an error too small to
# see in a few elements once reduced over many (the mean of a poor exp over a large tensor).
# Between these many elements per tensor, where only a few are scaled. Not one: a program
# wrong on part of the far range (a polynomial good to |x| = 6 on draws in [0, 1) scaled 16x
# or 1/16x per element) slips through a draw at n places with chance (its right share)^n, and
# with 1-16 places range_poly_within_2x passed in about one job in fourteen; from 8 on, the
# chance is under 1%, and a guard that samples the input still almost never meets a place.
WIDEN_FEW_LEAST, WIDEN_FEW = 8, 32


def widened_how(how: str, seed: int) -> str:
    """How ``widen`` changes a draw, in words: "times -2" or "times -2 at a few places"."""
    what = "its integers " if how.endswith(" int") else ""
    k = WIDEN[how]
    by = (f"times {', '.join(f'{f:g}' for f in k[:-1])} or {k[-1]:g}, element by element"
          if isinstance(k, tuple) else f"times {k:g}")
    return f"{what}{by}" + (" at a few places" if widens_few(seed) else "")


def widens_few(seed: int) -> bool:
    """Whether ``widen`` under ``seed`` scales a few places (else whole tensors)."""
    import torch
    g = torch.Generator().manual_seed(_widen_seed(seed))
    return bool(torch.randint(0, 2, (1,), generator=g))


def _widen_seed(seed: int) -> int:
    return (int(seed) * 0x9E3779B1 + 0x7F4A7C15) % (1 << 63)


def widen(xs: list, how: str | None, seed: int = 0) -> list:
    """The floating (and complex) tensors of ``xs`` times ``WIDEN[how]`` (the ``int`` ways:
    the integer ones), whole or at a few places (decided by ``seed``); the rest untouched
    (indices, masks, sizes). ``how`` None: ``xs`` itself."""
    import torch
    if how is None:
        return xs
    k = WIDEN[how]
    g = torch.Generator().manual_seed(_widen_seed(seed))
    few = bool(torch.randint(0, 2, (1,), generator=g))
    out = []
    for x in xs:
        if not scales(x, how):
            out.append(x)
            continue
        if not few or x.numel() == 0:
            out.append(_scaled(x, k, g))
            continue
        n = WIDEN_FEW_LEAST + int(torch.randint(0, WIDEN_FEW - WIDEN_FEW_LEAST + 1, (1,),
                                                generator=g))
        # each place once: a place drawn twice would get two factors, and which one a write
        # with repeated indices keeps is not defined (the judge and a sandbox must agree)
        places = torch.randint(0, x.numel(), (n,), generator=g).unique().to(x.device)
        y = x.clone()
        at = torch.unravel_index(places, x.shape)
        y[at] = x[at] * _factor(k, x[at].shape, x, g)
        out.append(y)
    return out


WIDEN_CHUNK = 1 << 26   # elements scaled at a time by a tuple's factors


def _scaled(x: Any, k: Any, g: Any) -> Any:
    """``x`` times ``k`` whole: a number, or for a tuple one of its factors per element
    (``_factor``), drawn and applied in pieces of WIDEN_CHUNK elements over a copy of a
    contiguous ``x``. At once, the pick of factors (int32) and the index torch widens it to
    (int64) took three times the bytes of a float input: 16 GiB more for an input of 8 GiB.
    A tensor that is not contiguous is still widened at once. The judge and the sandbox draw
    alike only if both take the same path: the path follows the draw's layout, which both
    make the same way (a layout changed on one side would change the factors)."""
    import torch
    if not isinstance(k, tuple) or not x.is_contiguous():
        return x * _factor(k, x.shape, x, g)
    y = x.clone()
    flat = torch.view_as_real(y.view(-1)) if x.is_complex() else y.view(-1)
    on = _factor_generator(x, g)
    table = _table(k, x)
    for i in range(0, x.numel(), WIDEN_CHUNK):
        part = flat[i:i + WIDEN_CHUNK]
        pick = _pick(len(k), part.shape[:1], x, on)
        part.mul_(table[pick].view(-1, *([1] * (part.dim() - 1))))
    return y


def _factor_generator(x: Any, g: Any) -> Any:
    import torch
    return torch.Generator(device=x.device).manual_seed(
        int(torch.randint(0, 1 << 62, (1,), generator=g)))


def _pick(n: int, shape: Any, x: Any, on: Any) -> Any:
    import torch
    return torch.randint(0, n, tuple(shape), generator=on, device=x.device,
                         dtype=torch.int32)   # not int64: a whole large input's worth


def _table(k: tuple, x: Any) -> Any:
    import torch
    real = x.real.dtype if x.is_complex() else x.dtype
    return torch.tensor(k, dtype=real, device=x.device)


def _factor(k: Any, shape: Any, x: Any, g: Any) -> Any:
    """``k`` itself, or for a tuple one of its factors per element of ``shape``, drawn on
    ``x``'s device from a generator seeded from ``g`` (the judge and a sandbox that draws for
    itself get the same)."""
    if not isinstance(k, tuple):
        return k
    return _table(k, x)[_pick(len(k), shape, x, _factor_generator(x, g))]


def tensors(out: Any) -> list:
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o)]
    return []


def write_outputs(outs: list, folder: Path, tag: str, reuse: bool = False) -> list[dict]:
    """Sandbox side: each output's bytes (contiguous, on the host) in a file of its own.
    ``reuse``: write over a file of that name left by an earlier call, in place: its memory
    pages are there already (a new file of tens of MB takes milliseconds to allocate)."""
    import torch
    entries = []
    for i, t in enumerate(outs):
        path = folder / f"{tag}_{i}.bin"
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
        if flat.is_cuda:   # through page-locked memory: several times faster for GBs
            raw = torch.empty(flat.numel(), dtype=torch.uint8, pin_memory=True)
            raw.copy_(flat)
        else:
            raw = flat
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                     | (0 if reuse else os.O_TRUNC), 0o600)
        try:
            _write_all(fd, raw.numpy().data)
            os.ftruncate(fd, flat.numel())
        finally:
            os.close(fd)
        entries.append({"path": str(path), "shape": list(t.shape), "nbytes": flat.numel(),
                        "dtype": str(t.dtype).replace("torch.", "")})
    return entries


# A checked call whose inputs and outputs together pass this many bytes gives the memory its
# process's allocator keeps back to the device once done, on either side: the judge and the
# sandbox share one GPU, and each keeping its peak in reserve left the other too little (calls
# on tensors of GBs ran out of memory on an 80 GB GPU with half of it unused).
LARGE_CALL_BYTES = 1 << 30


def let_go_if_large(nbytes: int, device: str) -> None:
    """The allocator's unused memory back to ``device`` after a call of ``nbytes``."""
    if nbytes > LARGE_CALL_BYTES and device.startswith("cuda"):
        from ..gpulock import release_cached_memory
        release_cached_memory(device)


PLAIN = (bool, int, float, str, type(None))
# inputs larger than this are drawn by the sandbox itself: through shared memory they would be
# held three times at once (the judge's draw, the file, the sandbox's copy)
HAND_OVER_BYTES = 256 << 20


def hand_over(xs: list, folder: Path, name: str) -> list[dict] | None:
    """Judge side: a timed call's inputs, drawn here, for the sandbox to take over: tensors as
    files in ``folder`` (the judge's, which the sandbox may not read until ``reveal`` moves
    them into one it may read and not write), plain values as they are. None when one cannot
    travel that way, or they are larger than ``HAND_OVER_BYTES`` (the sandbox then draws them
    itself).

    Inputs drawn here leave nothing of the candidate's code between the judge's command and the
    forward but reading them, so work hidden in the draw (a replaced ``torch.randn`` that
    computes the answer) has nowhere to go that the judge's clock does not see."""
    import torch
    if sum(x.numel() * x.element_size() for x in xs
           if isinstance(x, torch.Tensor)) > HAND_OVER_BYTES:
        return None
    entries: list[dict] = []
    for i, x in enumerate(xs):
        if isinstance(x, PLAIN):
            entries.append({"value": x})
            continue
        if not isinstance(x, torch.Tensor) or x.is_cuda or x.layout != torch.strided \
                or x.requires_grad or type(x) is not torch.Tensor:
            return None
        path = folder / f"{name}_{i}.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o640)
        with os.fdopen(fd, "wb") as f:
            f.write(x.detach().contiguous().reshape(-1).view(torch.uint8).numpy().data)
        entries.append({"path": str(path), "shape": list(x.shape),
                        "dtype": str(x.dtype).replace("torch.", "")})
    return entries


def reveal(entries: list[dict] | None, folder: Path) -> list[dict] | None:
    """Judge side, once its clock runs: the files ``hand_over`` wrote where the sandbox cannot
    look, moved (renamed: nothing is copied) into ``folder``, which it may read. Written into
    its folder directly, an input could be read while the judge was still writing it, and the
    answer computed from it before the call was sent, outside the clock."""
    if entries is None:
        return None
    out = []
    for e in entries:
        if "path" in e:
            path = str(folder / os.path.basename(e["path"]))
            os.rename(e["path"], path)
            e = dict(e, path=path)
        out.append(e)
    return out


def take_over(entries: list[dict]) -> list:
    """Sandbox side: the inputs ``hand_over`` wrote, as new tensors of this process."""
    import torch
    xs = []
    for e in entries:
        if "value" in e:
            xs.append(e["value"])
            continue
        x = torch.empty(e["shape"], dtype=getattr(torch, e["dtype"]))
        with open(e["path"], "rb") as f:
            f.readinto(x.reshape(-1).view(torch.uint8).numpy().data)
        xs.append(x)
    return xs


# madvise: map a file's pages into the page table, readable, without copying them (Linux 5.14)
MADV_POPULATE_READ = 22


def map_inputs(entries: list[dict]) -> list:
    """Sandbox side, a timed call's inputs: the files ``hand_over`` wrote, mapped into this
    process copy-on-write, with no pass over their bytes. A pass here (``take_over``'s read)
    is part of the path the judge's clock takes off as calibrated on the reference, and a
    candidate that rewrote it to compute as it read hid a forward's work there; a mapping
    leaves no work of the size of the inputs to rewrite. The pages are mapped in ahead
    (``MADV_POPULATE_READ``) so the forward's first touch of them costs no more than a
    caller's would; a write to one copies that page only."""
    import mmap

    import torch
    xs = []
    for e in entries:
        if "value" in e:
            xs.append(e["value"])
            continue
        dtype = getattr(torch, e["dtype"])
        nbytes = dtype.itemsize * math.prod(e["shape"])
        if nbytes == 0:
            xs.append(torch.empty(e["shape"], dtype=dtype))
            continue
        fd = os.open(e["path"], os.O_RDONLY | os.O_NOFOLLOW)
        try:
            m = mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        try:
            m.madvise(MADV_POPULATE_READ)
        except (OSError, ValueError):   # an older kernel: the forward faults them in
            pass
        xs.append(torch.frombuffer(m, dtype=dtype).reshape(e["shape"]))
    return xs


class _Iovec:
    """``struct iovec`` and ``process_vm_readv``, made once (ctypes)."""
    made: Any = None

    @classmethod
    def get(cls) -> Any:
        if cls.made is None:
            import ctypes

            class Iovec(ctypes.Structure):
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.process_vm_readv
            fn.restype = ctypes.c_ssize_t
            fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p,
                           ctypes.c_ulong, ctypes.c_ulong]
            cls.made = (Iovec, fn, ctypes)
        return cls.made


PEEK_CHUNK = 64 << 10
IOV_MAX = 1024


def peek(pid: int, addr: int, host: Any) -> str:
    """Judge side: ``host.numel()`` bytes of process ``pid``'s memory from ``addr`` into the
    uint8 tensor ``host`` ("" when all were read, else why not), in PEEK_CHUNK pieces taken
    in an order drawn here: a process that went on writing its outputs after it answered (a
    signal handler, on a spare core) cannot keep ahead of a read whose next piece it cannot
    know."""
    Iovec, readv, ctypes = _Iovec.get()
    n, base = host.numel(), host.data_ptr()
    spans = [(a, min(PEEK_CHUNK, n - a)) for a in range(0, n, PEEK_CHUNK)]
    random.SystemRandom().shuffle(spans)
    for i in range(0, len(spans), IOV_MAX):
        part = spans[i:i + IOV_MAX]
        local = (Iovec * len(part))(*[Iovec(base + a, k) for a, k in part])
        remote = (Iovec * len(part))(*[Iovec(addr + a, k) for a, k in part])
        want = sum(k for _, k in part)
        got = readv(pid, local, len(part), remote, len(part), 0)
        if got != want:
            why = os.strerror(ctypes.get_errno()) if got < 0 else f"{got} of {want} bytes"
            return f"protocol: the judge could not read the outputs in the candidate's process ({why})"
    return ""


def can_peek(pid: int, probe: Any) -> bool:
    """Whether the judge can read process ``pid``'s memory (``peek``): ``probe`` is the
    address and bytes (hex) of a buffer the sandbox made before any candidate code was
    loaded. Not where the judge is not root and the system forbids tracing its own user's
    processes (then outputs travel as files, ``pin_output``)."""
    import torch
    try:
        want = bytes.fromhex(probe["bytes"])
        host = torch.empty(len(want), dtype=torch.uint8)
        return 0 < len(want) and not peek(pid, int(probe["addr"]), host) \
            and bytes(host.numpy()) == want
    except (KeyError, TypeError, ValueError, OSError, AttributeError):
        return False


_ANONYMOUS = ("/dev/zero", "/memfd:", "/SYSV", "anon_inode:", "[")


def in_file_mapping(pid: int, entries: Any) -> str:
    """Judge side, with process ``pid`` frozen after a timed call: the path of a file that one
    of the call's outputs (``entries``: address, shape, dtype) lies in a mapping of, else "".
    A program's outputs are its own memory; one that maps a file its input was handed over in
    a second time returns the input's bytes without moving one, and at another address than
    the input's, so no check of overlapping addresses sees it
    (candidates/output_remaps_input_file.py)."""
    import torch
    spans = []
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict) and isinstance(e.get("addr"), int) \
                and isinstance(e.get("shape"), list):
            dtype = getattr(torch, str(e.get("dtype")), None)
            if isinstance(dtype, torch.dtype):
                n = dtype.itemsize * math.prod(int(d) for d in e["shape"])
                if n:
                    spans.append((e["addr"], e["addr"] + n))
    if not spans:
        return ""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        parts = line.split(maxsplit=5)
        # anonymous memory: private (inode 0), shared (/dev/zero), memfd, SysV, pseudo-files;
        # bytes reach those only by being written there
        if len(parts) < 6 or parts[4] == "0" or parts[5].startswith(_ANONYMOUS):
            continue
        lo, _, hi = parts[0].partition("-")
        start, end = int(lo, 16), int(hi, 16)
        if any(a < end and start < b for a, b in spans):
            return parts[5].strip()
    return ""


def peek_output(pid: int, entry: Any, limit: int) -> Pinned:
    """Judge side, as soon as a timed call has answered: its output read whole out of the
    candidate's process (``entry``: its address, shape and dtype there), before the judge's
    clock stops. The read is the judge's: no pass over the output's bytes is left in the
    candidate's process for it to rewrite into compute, and it is what the output held
    when the call answered. ``limit``: the most bytes it may claim (the judge's memory)."""
    import torch
    if not isinstance(entry, dict) or not isinstance(entry.get("addr"), int) \
            or entry["addr"] < 0:
        return Pinned([], "", "protocol: an output entry without its address")
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        return Pinned([], "", "protocol: an output entry without a shape")
    dtype = getattr(torch, str(entry.get("dtype")), None)
    if not isinstance(dtype, torch.dtype):
        return Pinned([], "", "protocol: an output entry with an unknown dtype")
    nbytes = dtype.itemsize * math.prod(shape)
    if nbytes > limit:
        return Pinned([], "", f"protocol: an output of {nbytes} bytes, more than any the "
                      "reference returns")
    host = torch.empty(nbytes, dtype=torch.uint8)
    err = peek(pid, entry["addr"], host) if nbytes else ""
    if err:
        return Pinned([], "", err)
    return Pinned(shape, str(entry["dtype"]), nbytes=nbytes, host=host)


# Pages of a timed call's output file the judge reads when the call answers. A sandbox that
# leaves a share f of its output to be written later is caught with probability
# 1 - (1 - f) ** SAMPLED_PAGES (92% at 1%), for a read of at most a megabyte per call.
SAMPLED_PAGES = 256
PAGE = 4096


class Pinned:
    """A timed call's output as the judge found it when the call answered, before its clock
    stopped: its bytes read whole out of the candidate's process (``peek_output``), or, where
    the judge cannot read that process's memory, the open output file and its bytes at
    ``SAMPLED_PAGES`` pages picked at random here (judge-side only: nothing the sandbox sends
    can be one). When a file is checked,
    after the round, the whole file is read and must still hold those bytes: the sandbox is
    the candidate's process, and could otherwise write a call's outputs only once a check
    asks for them, outside every clock."""

    def __init__(self, shape: list, dtype: str, error: str = "", fd: int = -1,
                 nbytes: int = 0, samples: dict | None = None, host: Any = None):
        self.shape, self.dtype, self.error = shape, dtype, error
        self.fd, self.nbytes, self.samples = fd, nbytes, samples or {}
        self.host = host   # the bytes themselves, where the judge read them at once (peek)

    def read(self) -> Any:
        """The whole file as a uint8 host tensor, or why it is not the file pinned."""
        import torch
        if self.host is not None:
            return self.host
        if os.fstat(self.fd).st_size != self.nbytes:
            return "output_changed: the output file changed size after the call answered"
        host = torch.empty(self.nbytes, dtype=torch.uint8)
        err = _read_into(self.fd, host)
        if err:
            return err
        raw = host.numpy().data
        for off, old in self.samples.items():
            if bytes(raw[off:off + len(old)]) != old:
                return ("output_changed: the output file changed after the call answered (its "
                        "outputs were written later than the call returned them)")
        return host

    def close(self) -> None:
        self.host = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def pin_output(entry: Any, folder: str) -> Pinned:
    """Judge side, as soon as a timed call has answered: its output file opened and sampled
    (``Pinned``). A few hundred reads of one page: the judge's clock around the call stays
    what it was."""
    import torch
    bad = _bad_entry(entry)
    if bad:
        return Pinned([], "", bad)
    dtype = getattr(torch, str(entry.get("dtype")), None)
    if not isinstance(dtype, torch.dtype):
        return Pinned([], "", "protocol: an output entry with an unknown dtype")
    nbytes = dtype.itemsize * math.prod(entry["shape"])
    fd = _open_output(entry["path"], nbytes, folder)
    if isinstance(fd, str):
        return Pinned([], "", fd)
    pages = -(-nbytes // PAGE)
    picked = (range(pages) if pages <= SAMPLED_PAGES
              else random.SystemRandom().sample(range(pages), SAMPLED_PAGES))
    samples = {p * PAGE: os.pread(fd, PAGE, p * PAGE) for p in picked}
    return Pinned(list(entry["shape"]), dtype=str(entry["dtype"]), fd=fd, nbytes=nbytes,
                  samples=samples)


def read_output(entry: Any, like: Any, folder: str | None = None) -> Any:
    """Judge side: the sandbox's output as a tensor on ``like``'s device, or a string saying
    why it cannot be one ("shape_mismatch: ..." / "dtype_mismatch: ..." / "protocol: ...").

    ``folder``: the outputs folder the judge made for this sandbox; a path elsewhere, or one
    reached through a link, is a protocol error (the judge reads as a more privileged user);
    a file read there is removed (each is read once). ``entry`` may also be a ``Pinned``
    output file."""
    import torch
    if isinstance(entry, Pinned):
        if entry.error:
            return entry.error
        shape, dtype = entry.shape, entry.dtype
    else:
        bad = _bad_entry(entry)
        if bad:
            return bad
        shape, dtype = entry["shape"], entry.get("dtype")
    if list(like.shape) != shape:
        return f"shape_mismatch: shape {tuple(shape)} != {tuple(like.shape)}"
    want = str(like.dtype).replace("torch.", "")
    if dtype != want:
        return f"dtype_mismatch: dtype {dtype} != {want}"
    nbytes = like.numel() * like.element_size()
    if isinstance(entry, Pinned):
        host = entry.read()
    else:
        fd = _open_output(entry["path"], nbytes, folder)
        if isinstance(fd, str):
            return fd
        try:   # read straight into page-locked memory when it goes on to the GPU
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=like.is_cuda)
            host = _read_into(fd, host) or host
        finally:
            os.close(fd)
            if folder is not None:
                # read once: the file goes now, not with the sandbox's folder at the job's
                # end (a round's picked outputs and inputs of GBs each, in memory-backed
                # files, filled the host over one job and the judge was killed)
                with contextlib.suppress(OSError):
                    os.unlink(entry["path"])
    if isinstance(host, str):
        return host
    if nbytes == 0:
        return torch.empty(like.shape, dtype=like.dtype, device=like.device)
    return host.view(like.dtype).reshape(like.shape).to(like.device)


def _bad_entry(entry: Any) -> str:
    """Why an output entry the sandbox sent is malformed ("" when it is not)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return "protocol: an output entry without a path"
    shape = entry.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        return "protocol: an output entry without a shape"
    if not re.fullmatch(r"[\w./-]+\.bin", entry["path"]):
        return "protocol: an output path with odd characters"
    return ""


def _open_output(path: str, nbytes: int, folder: str | None) -> int | str:
    """A descriptor of the regular file ``path`` of exactly ``nbytes`` (in ``folder``,
    reached through no link), or a "protocol: ..." string."""
    where, name = os.path.split(path)
    if folder is not None and where != folder:
        return "protocol: an output file outside the sandbox's outputs folder"
    try:
        home = os.open(where or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=home)
        finally:
            os.close(home)
    except OSError as e:
        return f"protocol: cannot open the output file ({e.strerror})"
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != nbytes:
        os.close(fd)
        return f"protocol: the output file is not {nbytes} bytes of a regular file"
    return fd


# Outputs of GBs cross as files on tmpfs: one thread copies 1-2 GB/s there, so a 4 GB output
# took seconds each way, five trials and the checked timed calls over, all of it holding the
# GPU. Chunks of this size are written and read by up to IO_THREADS threads at once (os.pwrite
# and os.preadv let go of the GIL), as far as memory bandwidth goes.
IO_CHUNK = 64 << 20
IO_THREADS = 8


def _chunked(n: int, one: Any) -> list:
    """``one(start, end)`` over [0, n) in IO_CHUNK pieces, on up to IO_THREADS threads."""
    spans = [(a, min(a + IO_CHUNK, n)) for a in range(0, n, IO_CHUNK)]
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    width = max(1, min(IO_THREADS, cores, len(spans)))
    if width == 1:
        return [one(a, b) for a, b in spans]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(width, thread_name_prefix="stitch-io") as pool:
        return list(pool.map(lambda span: one(*span), spans))


def _write_all(fd: int, view: Any) -> None:
    """All of ``view`` (a bytes-like memoryview) into ``fd`` from offset 0."""
    view = memoryview(view).cast("B")

    def one(a: int, b: int) -> None:
        while a < b:
            a += os.pwrite(fd, view[a:b], a)
    _chunked(len(view), one)


def _read_into(fd: int, host: Any) -> str:
    """The file from its start into the uint8 tensor ``host`` ("" when whole)."""
    view = host.numpy().data

    def one(a: int, b: int) -> str:
        while a < b:
            n = os.preadv(fd, [view[a:b]], a)
            if n <= 0:
                return "protocol: the output file shrank while it was read"
            a += n
        return ""
    return next((e for e in _chunked(len(view), one) if e), "")
