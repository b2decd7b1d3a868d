"""Where the candidate's threads are, seen from outside its process: a sampling profiler.

On the CPU no device trace exists, and the profiler's trace is taken inside the candidate's
process, where a program can see that it is on (and compute otherwise meanwhile) or step
around it (numpy, a thread of its own). The judge samples instead: at moments it draws, in
timed calls it picks, it stops every thread of the candidate's process (``Sandbox.frozen``)
and reads, for each thread stopped in its own code, the instruction it stopped at (the last
field of ``/proc/PID/task/TID/syscall``: a process may read this of another only where it
may trace it). Each address is named by the file mapped there and, in PyTorch's own
library, by the function (its ELF symbol table): the candidate's own code, the interpreter,
PyTorch's bookkeeping, PyTorch's CPU kernels, a vendor library (BLAS, oneDNN), or another
package's compiled code (numpy, scipy, a system BLAS).

Nothing the candidate does inside its process changes what the samples say: they are read by
the kernel's record of a stopped thread, and which calls are sampled, and when, is known only
to the judge until the stop. A copy of a library under a new name is told by its build id.
What it cannot see: compute shorter than the gap between samples, and code generated at run
time (anonymous memory), which counts as a vendor library's (oneDNN's CPU kernels are made so).
An address a library held before the candidate's code was loaded is named by that library
whatever is mapped there later.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import sys
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

# kinds of code an address may be in
OWN = "own"                  # the candidate's: its kernels, files of its own
PYTHON = "python"            # the interpreter
TORCH = "torch"              # PyTorch's dispatch, allocation, bindings
TORCH_COPY = "torch_copy"    # PyTorch's copy and fill kernels (move data, compute nothing)
TORCH_COMPUTE = "torch_compute"   # PyTorch's CPU kernels
LIBRARY = "library"          # vendor libraries a plan may keep (BLAS, oneDNN, MKL)
RUNTIME = "runtime"          # the C runtime, libm, OpenMP, the loader
PACKAGE = "package"          # compiled code not the candidate's: numpy, scipy, torch.compile's
# code that computes; the interpreter, PyTorch's bookkeeping and the C runtime say nothing
# either way of who computed
WORKING = (OWN, TORCH_COPY, TORCH_COMPUTE, LIBRARY, PACKAGE)
# the kinds from the most to the least telling of a fallback: where an address can be named two
# ways, the first of these is what it is called
GRAVITY = (TORCH_COMPUTE, PACKAGE, TORCH_COPY, LIBRARY, OWN, TORCH, RUNTIME, PYTHON)
LABELS = {OWN: "the candidate's own code", TORCH_COMPUTE: "PyTorch's CPU kernels",
          LIBRARY: "a vendor library (GEMM, convolution)",
          PACKAGE: "compiled code not the candidate's (numpy, scipy, a system BLAS, "
          "torch.compile's)", TORCH_COPY: "PyTorch's copies and fills",
          TORCH: "PyTorch's bookkeeping (dispatch, allocation)", PYTHON: "the interpreter",
          RUNTIME: "the C runtime (libc, libm, OpenMP)"}

# code the kernel maps into every process (clock_gettime and its like): the runtime's
KERNEL_PAGES = ("[vdso]", "[vsyscall]")
# the C and C++ runtime and what every program loads: their time is nobody's compute
RUNTIME_LIBS = re.compile(r"^(ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libgcc_s|"
                          r"libstdc\+\+|libgomp|libiomp5|libutil|libz|libffi|libuuid|"
                          r"libcrypt|libtinfo|libexpat|liblzma|libbz2|libnuma|libnss|"
                          r"libresolv|libselinux|libpcre|libcudart|libcuda|libnvrtc|"
                          r"libnvJitLink|libcupti)([.\-]|$)")
PYTHON_LIBS = re.compile(r"^(python3?(\.\d+)?$|libpython3)")
# the math library computes for whoever called it (expf in PyTorch's scalar loop is PyTorch's
# work): a sample there is named by its caller, found on the stack (x86-64 only, where a call
# leaves its return address there)
MATH_LIBS = re.compile(r"^(libm|libmvec)([.\-]|$)")
STACK_WORDS = 16   # 128 bytes: a math function's frame and its caller's return address
X86_64 = os.uname().machine == "x86_64"
# what a plan may keep (aten.LIBRARY: GEMMs, convolutions, attention), inside PyTorch's
# library: the vendor routines and the convolution and attention code around them
LIBRARY_SYMBOLS = re.compile(r"mkl_blas|mkl_dnn|dnnl|mkldnn|ideep|gemm|cblas|fbgemm|xnnpack|"
                             r"openblas|cpublas|convolution|conv_?[123]d|slow_conv|im2col|"
                             r"col2im|vol2col|unfolded[23]d|unfold3d|compute_columns[23]d|"
                             r"ConvParams|check_shape_forward|flash_attention|_mm_kernel|"
                             r"nnpack|addmm|bmm|matmul|linear|addmv|mv_out", re.IGNORECASE)
# casts between float formats that PyTorch hands to fbgemm (x.half(), x.bfloat16())
CONVERSIONS = re.compile(r"FloatToFloat16|Float16ToFloat|FloatToBfloat16|Bfloat16ToFloat")
# PyTorch's CPU kernels: the files compiled once per instruction set, whose code sits in
# at::native's per-ISA namespaces, in anonymous ones inside at::native, or in its functions of
# internal linkage (a .cpp file's static workers: sparse adds), the loop templates that call
# into them, and the vector math they use. The namespace is matched without its enclosing
# ``at``, which a mangled name may give as a back-reference (``NS8_6native``). The rest of
# at::native (detach, empty, checks of arguments, structured ops' set-up) is bookkeeping
KERNEL_SYMBOLS = re.compile(r"6native(7DEFAULT|4AVX2|6AVX512|4ZVEC|3SVE|5VSX|12_GLOBAL__N_1|"
                            r"L\d+[A-Za-z_]*?(worker|kernel|loop|impl|template))|"
                            r"N2at3vec|cpu_kernel|VectorizedLoop2d|basic_loop|"
                            r"mkl_vml|Sleef_|pocketfft|"
                            # loops outside those namespaces' names: scatter / gather, index
                            # ops, sorts, scans, resampling
                            r"cpu_scatter_gather|index_put|take_put|index_add|index_reduce|"
                            r"introsort|cumsum|cumprod|upsample|"
                            # an at::native lambda run by a parallel region or as a
                            # TensorIterator's loop (char** data, strides, sizes): the work of
                            # ops whose namespace the mangling gives as a back-reference
                            # (NS3_12_GLOBAL__N_1: sparse products, pools, nonzero)
                            r"invoke_parallel.*6native|"
                            r"function_refIFvPPcPKlllEE11callback_fn.*6native")
# the dispatcher's glue, whose mangled names hold a kernel's name among their template
# arguments; and the names of bookkeeping that sits beside the kernels (shape inference,
# checks of arguments)
_GLUE = re.compile(r"^_ZN3c104impl|^_ZTV|^_ZN2at4_ops|^_ZN2at4meta|^_ZN2at3cpu|"
                   r"^_ZN2at\d+composite|^_ZN5torch|wrap_kernel_functor|"
                   r"make_boxed_from_unboxed|DispatchStub")
_BOOKKEEPING = re.compile(r"_*(check|infer|is_|get_|make_|calc|validate|compute_shape|assert|"
                          r"TORCH_LIBRARY|empty|resize|view|out_device)", re.IGNORECASE)
# the ops that only move data or make tensors (aten.CHEAP's copies, fills and ranges), as the
# first word of a kernel's name, and the words that may follow it there
_COPY_FIRST = {"copy", "fill", "zero", "cat", "stack", "clone", "contiguous", "arange", "conj"}
_COPY_REST = {"kernel", "impl", "cpu", "serial", "out", "helper", "same", "dtype", "vec",
              "contiguous", "template"}
# the templates that run an op's lambda over a tensor's elements or a parallel range
_LOOPS = {"VectorizedLoop2d", "vectorized_loop", "basic_loop", "cpu_kernel", "cpu_kernel_vec",
          "cpu_serial_kernel", "cpu_serial_kernel_vec", "loop_2d_from_1d", "invoke_parallel",
          "parallel_reduce", "_parallel_run"}
# the loop templates and namespaces a kernel's mangled name has before the op it runs
_WRAPPERS = {"c10", "at", "native", "vec", "function_ref", "callback_fn", "VectorizedLoop2d",
             "loop_2d_from_1d", "cpu_kernel", "cpu_kernel_vec", "cpu_serial_kernel",
             "cpu_serial_kernel_vec", "basic_loop", "vectorized_loop", "_dim_apply",
             "parallel_for", "invoke_parallel", "_parallel_run", "DEFAULT", "AVX2", "AVX512",
             "ZVEC", "SVE", "VSX", "_GLOBAL__N_1", "TensorIteratorBase", "TensorIterator",
             "CPU_CAPABILITY", "templates", "internal", "parallel_reduce", "dereference",
             "dereference_impl", "dereference_vec", "dereference_vec_impl",
             "unroll_contiguous_scalar_checks", "Loop2d"}


@dataclass
class Mapping:
    start: int
    end: int
    offset: int
    path: str    # "" for anonymous memory
    file: tuple[int, int] = (0, 0)   # the mapped file's (device, inode)


@dataclass
class Image:
    """One ELF file's load segments and (lazily) its function symbols."""
    path: str
    segments: list[tuple[int, int, int]]          # (file offset, size, virtual address)
    build_id: bytes
    symtab: tuple[int, int, int, int] | None      # (offset, size, strtab offset, strtab size)
    _starts: list[int] = field(default_factory=list)
    _ends: list[int] = field(default_factory=list)
    _names: list[int] = field(default_factory=list)
    _loaded: bool = False

    def vaddr(self, file_offset: int) -> int | None:
        for off, size, vaddr in self.segments:
            if off <= file_offset < off + size:
                return file_offset - off + vaddr
        return None

    def symbol(self, vaddr: int) -> str:
        """The function holding ``vaddr`` ("" when none is named there)."""
        if not self._loaded:
            self._load()
        import bisect
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i < 0 or vaddr >= self._ends[i]:
            return ""
        return self._name(self._names[i])

    def _load(self) -> None:
        self._loaded = True
        if self.symtab is None:
            return
        import numpy as np
        off, size, _, _ = self.symtab
        dt = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                       ("value", "<u8"), ("size", "<u8")])
        with open(self.path, "rb") as f:
            f.seek(off)
            syms = np.frombuffer(f.read(size), dtype=dt)
        syms = syms[((syms["info"] & 0xF) == 2) & (syms["size"] > 0)]   # functions
        syms = syms[np.argsort(syms["value"], kind="stable")]
        self._starts = syms["value"].tolist()
        self._ends = (syms["value"] + syms["size"]).tolist()
        self._names = syms["name"].tolist()

    def _name(self, at: int) -> str:
        assert self.symtab is not None
        _, _, str_off, str_size = self.symtab
        if at >= str_size:
            return ""
        with open(self.path, "rb") as f:
            f.seek(str_off + at)
            raw = f.read(512)
        return raw.split(b"\0", 1)[0].decode("ascii", "replace")


_IMAGES: dict[tuple[str, int, int], Image | None] = {}


def image(path: str) -> Image | None:
    """The ELF file at ``path`` (cached by path, size and modification time), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_size, int(st.st_mtime_ns))
    if key not in _IMAGES:
        try:
            _IMAGES[key] = _read_elf(path)
        except (OSError, ValueError, struct.error):
            _IMAGES[key] = None
    return _IMAGES[key]


def _read_elf(path: str) -> Image | None:
    # a candidate may replace a file it mapped by a FIFO, whose open would wait for a writer
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:   # 64-bit only
            return None
        phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
        segments, notes = [], []
        for i in range(phnum):
            p_type, _, p_off, p_vaddr, _, p_filesz, _, _ = struct.unpack_from(
                "<IIQQQQQQ", ph, i * phentsize)
            if p_type == 1:
                segments.append((p_off, p_filesz, p_vaddr))
            elif p_type == 4:
                notes.append((p_off, p_filesz))
        build_id = b""
        for off, size in notes:
            f.seek(off)
            data, i = f.read(min(size, 4096)), 0
            while i + 12 <= len(data):
                namesz, descsz, ntype = struct.unpack_from("<III", data, i)
                name_end = i + 12 + ((namesz + 3) & ~3)
                if ntype == 3 and data[i + 12:i + 12 + namesz].rstrip(b"\0") == b"GNU":
                    build_id = data[name_end:name_end + descsz]
                i = name_end + ((descsz + 3) & ~3)
        symtab = None
        if shoff and shnum:
            f.seek(shoff)
            sh = f.read(shentsize * shnum)
            secs = [struct.unpack_from("<IIQQQQIIQQ", sh, i * shentsize) for i in range(shnum)]
            for want in (2, 11):   # SHT_SYMTAB, else SHT_DYNSYM
                for s in secs:
                    if s[1] == want and s[6] < len(secs):
                        link = secs[s[6]]
                        symtab = (s[4], s[5], link[4], link[5])
                        break
                if symtab:
                    break
    return Image(path, segments, build_id, symtab)


def mappings(pid: int) -> list[Mapping]:
    """The executable mappings of process ``pid``."""
    out: list[Mapping] = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or "x" not in parts[1]:
            continue
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        path = parts[5].strip() if len(parts) > 5 else ""
        if path.startswith("[") and path not in KERNEL_PAGES:
            path = ""
        major, _, minor = parts[3].partition(":")
        try:
            file = (os.makedev(int(major, 16), int(minor, 16)), int(parts[4]))
        except ValueError:
            file = (0, 0)
        out.append(Mapping(lo, hi, int(parts[2], 16), path, file))
    return out


def stopped_pcs(pid: int) -> list[tuple[int, int]] | None:
    """For each thread of a stopped process that stopped in its own code (not inside a system
    call), the address it stopped at and its stack pointer; None where the judge may not read
    them."""
    out: list[tuple[int, int]] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                fields = f.read().split()
        except PermissionError:
            return None
        except OSError:
            continue
        if len(fields) >= 3 and fields[0] == "-1":
            try:
                out.append((int(fields[-1], 16), int(fields[-2], 16)))
            except ValueError:
                continue
    return out


def call_target(ret: int, read: Callable[[int, int], bytes]) -> int | None:
    """Where the x86-64 call instruction ending just before ``ret`` goes: a direct call's
    target, or the address held in the slot a ``call [rip + d]`` reads, followed through a
    PLT stub (``jmp [rip + d]``, after endbr64 and a bnd prefix) to what its slot holds.
    None for any other bytes (a register or memory call whose target the stack cannot say).
    ``read(address, size)`` reads the process's memory."""
    code = read(ret - 6, 6)
    if len(code) < 6:
        return None
    target: int | None = None
    if code[1] == 0xE8:                                    # call rel32
        target = ret + int.from_bytes(code[2:], "little", signed=True)
    elif code[0] == 0xFF and code[1] == 0x15:              # call [rip + disp32]
        target = _word(read, ret + int.from_bytes(code[2:], "little", signed=True))
    if target is None:
        return None
    stub = read(target, 16)
    i = 4 if stub[:4] == ENDBR64 else 0
    i += 1 if stub[i:i + 1] == b"\xf2" else 0             # bnd
    if stub[i:i + 2] == b"\xff\x25" and len(stub) >= i + 6:   # jmp [rip + disp32]
        return _word(read, target + i + 6 + int.from_bytes(stub[i + 2:i + 6], "little",
                                                           signed=True))
    return target


ENDBR64 = b"\xf3\x0f\x1e\xfa"


def _word(read: Callable[[int, int], bytes], at: int) -> int | None:
    raw = read(at, 8)
    return int.from_bytes(raw, "little") if len(raw) == 8 else None


def _stack_words(mem, sp: int) -> list[int]:
    """Up to STACK_WORDS words from ``sp`` up, in blocks of 8 (the stack may end sooner; the
    stack pointer is the candidate's to set: any value)."""
    words: list[int] = []
    for at in range(sp, sp + 8 * STACK_WORDS, 64):
        try:
            mem.seek(at)
            raw = mem.read(64)
        except (OSError, ValueError, OverflowError):
            break
        words += struct.unpack(f"<{len(raw) // 8}Q", raw[:len(raw) // 8 * 8])
        if len(raw) < 64:
            break
    return words


class Sampler:
    """Samples of one candidate process, named as they are taken (its maps read once, again
    when an address falls outside them: a library loaded later)."""

    def __init__(self, pid: int, own_folders: tuple[str, ...] = (),
                 own_files: set[str] | dict[str, tuple[int, int]] | None = None):
        self.pid = pid
        self.own_folders = tuple(str(Path(p)) + os.sep for p in own_folders)
        # the libraries the judge built and copied into those folders (the caller adds each as
        # it hands it over): code in any other file there is no kernel of the candidate's
        # (torch.compile's, written to its cache in the sandbox's folder)
        self.own_files = own_files
        self.maps: list[Mapping] = []
        self.kinds: Counter[str] = Counter()
        self.where: dict[str, Counter[str]] = {}
        self.stops = 0
        self.first: Counter[str] = Counter()   # the first stop that found work being done
        self.readable = True
        self._trusted = _trusted_folders()
        self._known_ids = _known_build_ids()
        # the files mapped before the candidate's code loads (the Sampler is made then): an
        # address one of them held is named by it even if the candidate maps other memory
        # over it later (PyTorch's code copied to anonymous memory and moved back in place)
        self.before = [m for m in mappings(pid) if m.path]

    def sample(self) -> None:
        """One sample of a frozen process (the caller holds it stopped). Its maps are read
        again at every stop: a file mapped over a library's code while the maps were read,
        and moved off once the program saw it was sampled (a SIGCONT), would otherwise leave
        that library's addresses named by the file."""
        self.stops += 1
        pcs = stopped_pcs(self.pid)
        if pcs is None:
            self.readable = False
            return
        self.maps = mappings(self.pid)
        here: Counter[str] = Counter()
        for pc, sp in pcs:
            kind, where = self.name(pc)
            if kind == RUNTIME and MATH_LIBS.match(where):
                kind, where = self._caller(sp, where) or (kind, where)
            here[kind] += 1
            self.where.setdefault(kind, Counter())[where] += 1
        self.kinds.update(here)
        if not self.first and any(k in WORKING for k in here):
            self.first = here

    @property
    def working(self) -> int:
        """Samples so far of a thread in code that computes (``computing``)."""
        return computing(self.kinds)

    def name(self, pc: int) -> tuple[str, str]:
        m = self._find(pc)
        if m is None:
            self.maps = mappings(self.pid)
            m = self._find(pc)
        named = self._name_in(m, pc)
        was = next((b for b in self.before if b.start <= pc < b.end), None)
        if was is not None and (m is None or m.path != was.path):
            # mapped over since the candidate loaded: named both ways, the graver kept (a
            # copy of PyTorch's code moved back in place, numpy's over the interpreter's)
            before = self._name_in(was, pc)
            named = min(named, before, key=lambda kw: GRAVITY.index(kw[0]))
        return named

    def _caller(self, sp: int, lib: str) -> tuple[str, str] | None:
        """What called the math function a thread stopped in, from the first STACK_WORDS
        words of its stack: each word just past a call into the math library, from code
        outside the runtime, names a caller, and the gravest of them is the answer. A
        program can write words into the unwritten slots of a math function's frame (a
        return address of its own next to PyTorch's call), but cannot take away the real
        caller's, which a leaf math function's small frame keeps inside the window."""
        if not X86_64:
            return None

        def read(at: int, size: int) -> bytes:
            try:
                mem.seek(at)
                return mem.read(size)
            except (OSError, ValueError, OverflowError):
                return b""
        callers = []
        try:
            with open(f"/proc/{self.pid}/mem", "rb", buffering=0) as mem:
                for word in _stack_words(mem, sp):
                    if self._find(word) is None:
                        continue
                    target = call_target(word, read)
                    into = self._find(target) if target is not None else None
                    if into is None or not MATH_LIBS.match(os.path.basename(into.path)):
                        continue
                    kind, where = self.name(word)
                    if kind != RUNTIME:   # past math functions called by math functions
                        callers.append((kind, f"{where} (through {lib})"))
        except (OSError, ValueError, OverflowError):
            return None
        return min(callers, key=lambda kw: GRAVITY.index(kw[0])) if callers else None

    def _name_in(self, m: Mapping | None, pc: int) -> tuple[str, str]:
        if m is not None and m.path in KERNEL_PAGES:   # clock_gettime for a timer
            return RUNTIME, m.path
        if m is None or not m.path:
            # generated at run time: oneDNN's convolution and GEMM kernels on the CPU (so a
            # vendor library's), or the candidate's own, which cannot be told apart
            return LIBRARY, "code generated at run time"
        base = os.path.basename(m.path)
        kind = self._file_kind(m.path, base)
        if kind == OWN and not self._lent(m):
            # code in a file that is not a library the judge built for it, as mapped (one
            # renamed over a built library's name: torch.compile's, for a start)
            kind = PACKAGE
        if kind != TORCH or not self._is_torch_cpu(m.path, base):
            return kind, base
        img = image(m.path)
        vaddr = img.vaddr(pc - m.start + m.offset) if img else None
        sym = img.symbol(vaddr) if img is not None and vaddr is not None else ""
        return classify_torch_symbol(sym), _short(sym) or base

    def _is_torch_cpu(self, path: str, base: str) -> bool:
        """PyTorch's CPU library, under its name or, by its build id, under another."""
        if base.startswith("libtorch_cpu"):
            return True
        img = image(path)
        known = self._known_ids.get(img.build_id) if img is not None and img.build_id else None
        return known is not None and os.path.basename(known).startswith("libtorch_cpu")

    def _find(self, pc: int) -> Mapping | None:
        for m in self.maps:
            if m.start <= pc < m.end:
                return m
        return None

    def _file_kind(self, path: str, base: str) -> str:
        if path.startswith(self.own_folders):
            if self.own_files is not None and path not in self.own_files:
                return self._copied(path) or PACKAGE
            return self._copied(path) or OWN
        if not path.startswith(self._trusted):
            # a file where the candidate may write: a known library under a name that the
            # rules below would call neutral (numpy's code as .../torch/x.so or as libm.so.6)
            # is what its build id says
            copied = self._copied(path)
            if copied:
                return copied
        if (PYTHON_LIBS.match(base) or "/lib-dynload/" in path
                or path == os.path.realpath(sys.executable)):
            return PYTHON
        if RUNTIME_LIBS.match(base):
            return RUNTIME
        if "/torch/" in path:
            return TORCH
        if path.startswith(self._trusted):
            return PACKAGE if "mkl" not in base and "dnnl" not in base else LIBRARY
        # compiled code neither built by the judge for the candidate nor installed: another
        # package's (torch.compile's cache moved out of the sandbox's folder, a library
        # copied to /tmp or /dev/shm), never the candidate's own
        return self._copied(path) or (PACKAGE if self.own_files is not None else OWN)

    def _lent(self, m: Mapping) -> bool:
        """Whether ``m`` maps a library the judge built and copied in, that very file (its
        device and inode as handed over); any file, where the caller names none."""
        if self.own_files is None:
            return True
        if isinstance(self.own_files, dict):
            return self.own_files.get(m.path) == m.file
        return m.path in self.own_files

    def _copied(self, path: str) -> str | None:
        """A known library under another name (its build id): what that library is."""
        img = image(path)
        if img is None or not img.build_id:
            return None
        known = self._known_ids.get(img.build_id)
        if known is None:
            return None
        return self._file_kind(known, os.path.basename(known)) if known != path else None

    def report(self) -> dict:
        total = sum(self.kinds.values())
        return {"stops": self.stops, "samples": total, "kinds": dict(self.kinds),
                "labels": {k: LABELS[k] for k in self.kinds},
                "first": dict(self.first),
                "where": {k: dict(v.most_common(4)) for k, v in self.where.items()}}


def computing(kinds: Counter, allowed: Collection[str] = frozenset()) -> int:
    """Samples in code that computes, less copies (a forward of fills and concatenations says
    little of who computes) and less the ``allowed`` kinds."""
    return sum(kinds[k] for k in WORKING if k != TORCH_COPY and k not in allowed)


def judge(report: dict, *, compute_allowed: bool, library_allowed: bool) -> str | None:
    """What the samples show of work the candidate may not hand to others (None: nothing).
    ``compute_allowed``: PyTorch's CPU kernels may compute in its forward (a plan that keeps
    compute ops); ``library_allowed``: GEMM, convolution and attention libraries may (a plan
    that keeps them). Another package's compiled code (numpy, scipy, a system BLAS) is never
    the candidate's work.

    Two rules. Over all samples: at least MIN_HITS in forbidden code, a BAD_SHARE of those in
    code that computes, less the code it may hand work to (and copies). And the first stop that
    found work being done: a candidate learns that it is sampled once it is continued (a SIGCONT
    handler, a gap in its clock), never before, so one that hands its work to PyTorch until then
    and computes itself after shows it there (most of that stop's working threads in forbidden
    code)."""
    counted = [(k, LABELS[k]) for k, allowed in ((PACKAGE, False),
                                                  (TORCH_COMPUTE, compute_allowed),
                                                  (LIBRARY, library_allowed)) if not allowed]
    kinds = Counter(report.get("kinds", {}))
    first = Counter(report.get("first", {}))
    bad = sum(kinds[k] for k, _ in counted)
    # the share is of the computing not handed to others by right, copies left out: a
    # convolution the plan keeps takes most of a forward, and a pointwise epilogue claimed as
    # the candidate's own hid under it; concatenations of whole inputs hid PyTorch's products
    working = computing(kinds, {k for k, ok in ((TORCH_COMPUTE, compute_allowed),
                                                (LIBRARY, library_allowed)) if ok})
    first_bad = sum(first[k] for k, _ in counted)
    if bad >= MIN_HITS and bad >= BAD_SHARE * working:
        parts = [f"{kinds[k]} in {label} ({', '.join(report.get('where', {}).get(k, {}))})"
                 for k, label in counted if kinds[k]]
        return (f"of {sum(kinds.values())} samples of the candidate's threads in its timed "
                "calls, taken from outside its process at moments it cannot know, "
                + "; ".join(parts))
    if first_bad and 2 * first_bad > sum(first[k] for k in WORKING):
        labels = [f"{label} ({', '.join(report.get('where', {}).get(k, {}))})"
                  for k, label in counted if first[k]]
        return ("the first stop of the candidate's threads that found work being done, "
                "taken from outside its process at a moment it cannot know, found it in "
                + "; ".join(labels) + f" ({bad} of {working} samples in code that computes "
                "and is not a kept op's, in all: a program can tell it was sampled only "
                "after the first stop)")
    return None


MIN_HITS = 2        # samples in forbidden code needed for a verdict ...
BAD_SHARE = 0.25    # ... and their least share of the samples in code that computes
_NOISE = {"c10", "function_ref", "callback_fn", "at", "native", "vec", "AVX2", "AVX512",
          "DEFAULT", "Tensor", "TensorBase", "TensorIteratorBase", "Vectorized", "ArrayRef",
          "_GLOBAL__N_1", "Scalar", "std", "__cxx11", "basic_string", "char_traits",
          "allocator", "IntArrayRef", "optional", "TensorIterator", "internal", "detail"}


def identifiers(sym: str) -> list[str]:
    """The length-prefixed identifiers of a mangled C++ name, in order (the Itanium mangling;
    no demangler needed); [] for a C name."""
    if not sym.startswith("_Z"):
        return []
    words, i, end = [], 0, -1   # end: where the last identifier read ends
    while i < len(sym):
        if not sym[i].isdigit():
            i += 1
            continue
        j = i
        while j < len(sym) and sym[j].isdigit():
            j += 1
        # right after an identifier, digits are the next one's length (7DEFAULT12_GLOBAL..);
        # elsewhere they may be a back-reference (S9_, T0_) or a literal (Lb1E, Li3E)
        if i != end and ((sym[i - 1] in "ST" and sym[j:j + 1] == "_")
                         or re.fullmatch(r"L[a-z]", sym[i - 2:i])):
            i = j
            continue
        n, word = int(sym[i:j]), sym[j:j + int(sym[i:j])]
        if n and len(word) == n and re.fullmatch(r"[A-Za-z_]\w*", word):
            # a local name's length counts its scope's mangling too: cut that off
            words.append(re.split(r"E(?=[RNSKIvE0-9])", word)[0])
            i = end = j + n
        else:
            i = j
    return words


def _short(sym: str) -> str:
    """A mangled C++ name made readable enough for a message: its first few informative
    names."""
    words = [w for w in identifiers(sym) if w not in _NOISE and len(w) > 2
             and not re.match(r"_(\d|S\d|S_)", w)]
    return "::".join(list(dict.fromkeys(words))[:3])[:80] or sym[:80]


def op_word(sym: str) -> str:
    """The name of the op a kernel's symbol runs: its first identifier past PyTorch's
    namespaces and loop templates (``direct_copy_kernel`` in ``VectorizedLoop2d<lambda in
    direct_copy_kernel>``); a C name as it is."""
    if not sym.startswith("_Z"):
        return sym
    words = [w for w in identifiers(sym) if w not in _WRAPPERS and w not in _NOISE
             and len(w) > 2]
    # a kernel's own name before the helpers a loop template is instantiated with
    # (dereference_vec_impl<function_traits<lambda in direct_copy_kernel>>)
    named = [w for w in words if re.search(r"kernel|worker|_impl$|_template$|_cpu$|_helper$",
                                           w, re.IGNORECASE)]
    return (named or words or [""])[0]


def moves_data(sym: str) -> bool:
    """Whether the kernel ``sym`` runs only moves data or makes tensors: its op's name holds
    ``copy`` as a word (``reduced_float_copy_kernel``; ``copysign_kernel`` does not), or,
    past a ``direct_`` or ``cpu_``, is a fill's, a concatenation's or a range's followed by no
    more than a kernel's suffixes (``fill_kernel``; ``_fill_matrix_powers`` computes)."""
    words = [w for w in op_word(sym).split("_") if w]
    while words and words[0] in ("direct", "cpu"):
        words.pop(0)
    if not words:
        return False
    return "copy" in words or (words[0] in _COPY_FIRST
                               and all(w in _COPY_REST for w in words[1:]))


# the special functions of ATen's Math.h, templates outside any namespace that its kernels
# call out of line (digamma, the incomplete gammas, Bessel functions, erfcx): compute
MATH_HELPERS = re.compile(
    r"^(calc_(digamma|trigamma|polygamma|igammac?|i0e?|i1e?|erfinv|ndtri|log_ndtr|gcd)|"
    r"_igamc?_helper_[a-z_]+|zeta|chbevl|polevl|ratevl|trigamma|digamma_one|"
    r"lanczos_sum_expg_scaled|erfcx_y100|(modified_|scaled_modified_|spherical_)?bessel_"
    r"[a-z0-9_]+_forward|(shifted_)?chebyshev_polynomial_[tuvw]_forward|"
    r"hermite_polynomial_he?_forward|laguerre_polynomial_l_forward|"
    r"legendre_polynomial_p_forward|airy_ai_forward)$")


def classify_torch_symbol(sym: str) -> str:
    """The kind of code a function of PyTorch's CPU library is: LIBRARY, TORCH_COPY,
    TORCH_COMPUTE or TORCH (bookkeeping)."""
    if CONVERSIONS.search(sym):   # fbgemm's, but a cast: a copy
        return TORCH_COPY
    if LIBRARY_SYMBOLS.search(sym):
        return LIBRARY
    ids = identifiers(sym)
    if ids and MATH_HELPERS.match(ids[0]):
        return TORCH_COMPUTE
    return kernel_kind(sym) or TORCH


def kernel_kind(sym: str) -> str | None:
    """TORCH_COMPUTE or TORCH_COPY for a symbol in one of PyTorch's CPU kernels; None for its
    bookkeeping (dispatch glue, shape inference, checks) and everything else. A loop over
    elements is never bookkeeping, whatever helper names its lambda (an ELU's loop is
    ``VectorizedLoop2d<lambda in get_scalar_elu_elementwise_func>``)."""
    if _GLUE.search(sym) or not KERNEL_SYMBOLS.search(sym):
        return None
    word = op_word(sym)
    if _BOOKKEEPING.match(word) and not _LOOPS.intersection(identifiers(sym)):
        return None
    return TORCH_COPY if moves_data(sym) else TORCH_COMPUTE


def _trusted_folders() -> tuple[str, ...]:
    import site
    dirs = set()
    for d in [*site.getsitepackages(), site.getusersitepackages(), sys.prefix,
              sys.base_prefix, "/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib"]:
        if d and os.path.isdir(d):
            dirs.add(os.path.realpath(d) + os.sep)
            dirs.add(str(Path(d)) + os.sep)
    return tuple(sorted(dirs))


_KNOWN: dict[bytes, str] = {}


def _known_build_ids() -> dict[bytes, str]:
    """Build ids of the libraries this process has loaded (PyTorch, numpy, the runtime):
    a candidate's copy of one is that library."""
    if not _KNOWN:
        for m in mappings(os.getpid()):
            img = image(m.path) if m.path else None
            if img is not None and img.build_id:
                _KNOWN.setdefault(img.build_id, m.path)
    return _KNOWN
