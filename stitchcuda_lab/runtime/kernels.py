"""Load and launch compiled kernels: ``load`` (through the cache), CUDA and C modules.

Argument conversion (docs/CONTRACTS.md): torch.Tensor -> pointer to its data (the caller
guarantees contiguity and dtype), int -> 64-bit (``long long``), float -> 32-bit float,
bool -> 32-bit int, ``i32(v)`` / ``f64(v)`` for other widths. CUDA launches go on torch's
current stream. Compiler errors raise ``BuildError`` with the compiler's log.

This module is imported by generated code, so it cannot be handed a Settings object: the cache
folder and the kill switch come from ``Settings.from_env()`` (STITCH_CACHE_DIR, STITCH_CACHE,
which the worker sets), read in ``_cache()`` only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from ..errors import BuildError, UsageError
from . import build
from .cache import KernelCache

__all__ = ["load", "load_group", "i32", "f64", "sm_count", "CModule", "CudaModule",
           "clear_loaded", "build_cached", "use_builder"]

_LOADED: dict[tuple[Any, ...], CModule | CudaModule] = {}   # cache key -> loaded module (one build per process and key)
_LOCK = threading.Lock()


@dataclass(frozen=True)
class i32:  # noqa: N801  (reads like a C type at the call site)
    """A 32-bit int kernel argument: ``mod.call("f", x, runtime.i32(n))``."""
    value: int


@dataclass(frozen=True)
class f64:  # noqa: N801
    """A 64-bit float (double) kernel argument."""
    value: float


def load(source: str, lang: str = "cuda", name: str = "kernel", *,
         flags: Sequence[str] = ()) -> CModule | CudaModule:
    """Compile ``source`` (through the content-addressed cache) and load it in this process.

    ``lang`` is "cuda" (NVRTC device code, for the current GPU's arch) or "c" (cc -O3 -fopenmp).
    """
    flags = tuple(flags)
    if lang not in ("c", "cuda"):
        raise UsageError(f"unknown kernel language {lang!r} for {name!r}",
                         hint="use 'cuda' or 'c'")
    device = _cuda_device_index() if lang == "cuda" else None
    arch = _cuda_arch(device) if device is not None else _host_arch()
    with _LOCK:
        loaded_key = (lang, source, flags, arch, device)
        if loaded_key not in _LOADED:
            path = _BUILDER[0](lang, source, name, flags, arch)
            if device is None:
                build.passive_openmp()
            _LOADED[loaded_key] = (CModule(name, ctypes.CDLL(str(path)), str(path))
                                   if device is None
                                   else CudaModule(name, Path(path).read_bytes(), device))
        return _LOADED[loaded_key]


# A block every kernel of the offline coder carries (its helpers), guarded so that several
# kernels may share one translation unit: ``#ifndef SC_X`` / ``#define SC_X`` ... ``#endif``
_GUARDED = re.compile(r"^#ifndef (SC_\w+)\n#define \1\n.*?^#endif\b", re.M | re.S)
_GUARD_LINE = re.compile(r"^\s*#\s*ifndef\s+SC_\w+", re.M)   # any such guard, however written


def load_group(sources: dict[str, str], names: Sequence[str], lang: str = "cuda",
               name: str | None = None) -> dict[str, CModule | CudaModule]:
    """Kernels ``names`` of ``sources`` (one exported function each, named as its key) built as
    one module, and each name's module: a program of a hundred kernels (a deep model's fused
    layers) asks for a few builds, not a hundred. Their guarded blocks (``#ifndef SC_X``) are
    compiled once, from the first kernel that has each: a kernel whose copy of a block differs
    (a person edited it) is built alone, so the edit is what runs; and if the group does not
    build (two kernels define the same helper), each kernel is built alone, whose error then
    names it."""
    seen: dict[str, str] = {}
    together = []
    for n in names:
        blocks = {m.group(1): m.group(0) for m in _GUARDED.finditer(sources[n])}
        # a guard not in the form above (a person appended to its line) is a block this
        # cannot compare: the kernel goes alone, whose own copy then compiles
        plain = len(_GUARD_LINE.findall(sources[n])) == len(blocks)
        if plain and all(seen.get(k, v) == v for k, v in blocks.items()):
            seen.update(blocks)
            together.append(n)
    out: dict[str, CModule | CudaModule] = {}
    if len(together) > 1:
        try:
            mod = load("\n".join(sources[n] for n in together), lang, name or together[0])
            out.update((n, mod) for n in together)
        except BuildError:
            pass
    for n in names:
        if n not in out:
            out[n] = load(sources[n], lang, n)
    return out


def build_cached(lang: str, source: str, name: str, flags: tuple[str, ...], arch: str, *,
                 cache: KernelCache | None = None, user: int | None = None) -> Path:
    """The trusted build: compile through the cache and return the artifact's path.

    Runs where no candidate code does (the Verifier's process, or a person's own process when
    they load a finished model); a candidate's process asks the Verifier for its builds instead
    (``use_builder``), so it never writes the cache.
    """
    cache = cache or _cache()
    if lang == "c":
        cc = build.c_compiler()
        key = KernelCache.key(lang="c", source=source, flags=flags, c_flags=build.C_FLAGS,
                              cc=cc, cc_version=build.c_compiler_version(cc), arch=arch,
                              torch=_torch_version(), vector_math=build.vector_math(cc))
        return cache.get_or_build(
            key, lambda: build.compile_c(source, name=name, flags=flags, user=user), ".so",
            meta={"name": name, "lang": "c"})
    key = KernelCache.key(lang="cuda", source=source, flags=flags, arch=arch,
                          nvrtc=build.nvrtc_version(), torch=_torch_version())
    return cache.get_or_build(
        key, lambda: build.compile_cuda(source, name=name, arch=arch, flags=flags, user=user),
        ".cubin",
        meta={"name": name, "lang": "cuda", "arch": arch})


Builder = Callable[[str, str, str, tuple, str], "Path | str"]
_BUILDER: list[Builder] = [build_cached]


def use_builder(builder: Builder) -> None:
    """Route this process's builds through ``builder(lang, source, name, flags, arch) -> path``
    (the Verifier's candidate processes build through the Verifier)."""
    with _LOCK:
        _BUILDER[0] = builder
        _LOADED.clear()


def sm_count() -> int:
    """Streaming multiprocessors of the current GPU; CPU cores when there is no GPU."""
    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return os.cpu_count() or 1


class CModule:
    """A compiled C shared library; ``call(fn, *args)`` runs an exported function via ctypes."""

    def __init__(self, name: str, lib: ctypes.CDLL, path: str):
        self.name, self._lib, self.path = name, lib, path
        self._fns: dict[str, Any] = {}

    def call(self, fn: str, *args: Any) -> None:
        f = self._fns.get(fn)
        if f is None:
            try:
                f = getattr(self._lib, fn)
            except AttributeError:
                raise UsageError(f"C kernel {self.name!r} exports no function {fn!r}",
                                 hint="check the name and that it is not static") from None
            f.restype = None
            self._fns[fn] = f
        c_args = [_c_arg(a, fn, i) for i, a in enumerate(args)]
        with _profiled(fn):
            f(*c_args)

    def launch(self, fn: str, *a: Any, **k: Any) -> None:
        raise UsageError(f"{self.name!r} is a C module: use .call({fn!r}, *args)")


class CudaModule:
    """A cubin loaded through cuda.core; ``launch`` runs a kernel on torch's current stream."""

    def __init__(self, name: str, cubin: bytes, device: int):
        cc = build._cuda_core()
        self.name, self.device = name, device
        cc.Device(device).set_current()
        self._obj = cc.ObjectCode.from_cubin(cubin, name=name)
        self._kernels: dict[str, Any] = {}
        self._launches: dict[tuple, tuple[Any, Any]] = {}   # (fn, grid, block, smem) -> ready
        self._smem: dict[str, int] = {}                      # fn -> dynamic smem opted into
        self._cc = cc

    def kernel(self, fn: str) -> Any:
        k = self._kernels.get(fn)
        if k is None:
            try:
                k = self._obj.get_kernel(fn)
            except Exception as e:  # noqa: BLE001  (CUDA_ERROR_NOT_FOUND)
                raise UsageError(f"CUDA module {self.name!r} has no kernel {fn!r} ({e})",
                                 hint='declare it extern "C" __global__') from None
            self._kernels[fn] = k
        return k

    def launch(self, fn: str, grid: Sequence[int] | int, block: Sequence[int] | int,
               args: Sequence[Any] = (), shared_mem: int = 0) -> None:
        # A forward of a few hundred microseconds is dominated by what the host does per
        # launch: the kernel lookup, the shared-memory attribute and the config are made once.
        # (generated programs pass tuples, so the key is made without normalising first)
        try:
            ready = self._launches.get((fn, grid, block, shared_mem))
        except TypeError:   # lists: not hashable
            grid, block = _dims(grid), _dims(block)
            ready = self._launches.get((fn, grid, block, shared_mem))
        if ready is None:
            kernel = self.kernel(fn)
            # the opt-in is per kernel: only ever raised, so a smaller size set later cannot
            # break a larger launch whose configuration is already cached
            if shared_mem > max(48 * 1024, self._smem.get(fn, 0)):
                _allow_large_shared(kernel, shared_mem, self.device)
                self._smem[fn] = shared_mem
            ready = (kernel, self._cc.LaunchConfig(grid=_dims(grid), block=_dims(block),
                                                   shmem_size=int(shared_mem)))
            self._launches[(fn, grid, block, shared_mem)] = ready
        cargs = [_cuda_arg(a, fn, i) for i, a in enumerate(args)]
        with _profiled(fn):
            self._cc.launch(_current_stream(self.device), ready[1], ready[0], *cargs)

    def call(self, fn: str, *a: Any) -> None:
        raise UsageError(f"{self.name!r} is a CUDA module: use .launch({fn!r}, grid, block, args)")


def _profiled(fn: str) -> Any:
    """A profiler label for one kernel call, so timelines name our kernels (C ones included).

    Costs nothing when no profiler is running: the flag is read before anything is entered.
    """
    import torch
    if torch.autograd.profiler._is_profiler_enabled:
        return torch.profiler.record_function(f"stitch::{fn}")
    return contextlib.nullcontext()


# --- argument conversion -------------------------------------------------------------------

def _is_tensor(a: Any) -> bool:
    return hasattr(a, "data_ptr") and hasattr(a, "is_cuda")


def _c_arg(a: Any, fn: str, i: int) -> Any:
    if _is_tensor(a):
        if a.is_cuda:
            raise UsageError(f"argument {i} of C function {fn!r} is a CUDA tensor",
                             hint="C kernels take CPU tensors")
        return ctypes.c_void_p(a.data_ptr())
    if isinstance(a, i32):
        return ctypes.c_int32(a.value)
    if isinstance(a, f64):
        return ctypes.c_double(a.value)
    if isinstance(a, bool):
        return ctypes.c_int32(int(a))
    if isinstance(a, int):
        return ctypes.c_int64(a)
    if isinstance(a, float):
        return ctypes.c_float(a)
    if isinstance(a, ctypes._SimpleCData):
        return a
    raise UsageError(f"argument {i} of {fn!r} has unsupported type {type(a).__name__}",
                     hint="pass tensors, ints, floats, bools, runtime.i32 or runtime.f64")


def _cuda_arg(a: Any, fn: str, i: int) -> Any:
    import numpy as np
    if _is_tensor(a):
        if not a.is_cuda:
            raise UsageError(f"argument {i} of CUDA kernel {fn!r} is a CPU tensor",
                             hint="move it to the GPU first (.cuda())")
        return np.intp(a.data_ptr())
    if isinstance(a, i32):
        return np.int32(a.value)
    if isinstance(a, f64):
        return np.float64(a.value)
    if isinstance(a, bool):
        return np.int32(int(a))
    if isinstance(a, int):
        return np.int64(a)
    if isinstance(a, float):
        return np.float32(a)
    if isinstance(a, (np.generic, ctypes._SimpleCData)):
        return a
    raise UsageError(f"argument {i} of {fn!r} has unsupported type {type(a).__name__}",
                     hint="pass tensors, ints, floats, bools, runtime.i32 or runtime.f64")


def _dims(d: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(d, int):
        return (d,)
    return tuple(int(x) for x in d)


# --- CUDA plumbing -------------------------------------------------------------------------

_STREAMS: dict[tuple[int, int], Any] = {}


def _current_stream(device: int) -> Any:
    """torch's current stream as a cuda.core Stream (wrapped once per stream handle)."""
    import torch
    # the raw handle is a cheap read; the Stream object is only made for a handle not seen yet
    s = _STREAMS.get((device, torch._C._cuda_getCurrentRawStream(device)))
    if s is None:
        ts = torch.cuda.current_stream(device)
        s = build._cuda_core().Device(device).create_stream(ts)  # __cuda_stream__ protocol
        _STREAMS[(device, ts.cuda_stream)] = (s, ts)  # keep torch's stream alive with it
        return s
    return s[0]


def _allow_large_shared(kernel: Any, nbytes: int, device: int) -> None:
    from cuda.bindings import driver
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel.handle
    if type(handle).__name__ == "CUkernel":
        err, = driver.cuKernelSetAttribute(attr, nbytes, handle, device)
    else:
        err, = driver.cuFuncSetAttribute(handle, attr, nbytes)
    if int(err) != 0:
        raise UsageError(f"cannot raise dynamic shared memory to {nbytes} bytes ({err})",
                         hint="use less shared memory per block")


def _cuda_device_index() -> int:
    import torch
    if not torch.cuda.is_available():
        raise UsageError("runtime.load(lang='cuda') needs a CUDA GPU, and none is visible",
                         hint="use lang='c' kernels on the CPU, or run on a GPU machine")
    return torch.cuda.current_device()


def _cuda_arch(device: int) -> str:
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return f"{major}{minor}"


def _host_arch() -> str:
    import platform
    return platform.machine()


def _torch_version() -> str:
    try:
        import torch
        return torch.__version__
    except ImportError:
        return "none"


def _cache() -> KernelCache:
    # The one place the runtime reads configuration (generated code cannot be handed Settings).
    from ..settings import Settings
    s = Settings.from_env()
    return KernelCache(s.cache_dir, enabled=s.cache,
                       max_bytes=s.cache_max_mb * 2 ** 20 if s.cache_max_mb else None)


def clear_loaded() -> None:
    """Forget modules loaded in this process (tests; a fresh process starts empty anyway)."""
    with _LOCK:
        _LOADED.clear()


