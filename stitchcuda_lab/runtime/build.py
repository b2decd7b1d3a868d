"""Compilers: C source -> shared library (cc), CUDA device code -> cubin (NVRTC via cuda.core).

Both return the artifact's bytes and raise ``BuildError`` carrying the compiler's own log, with
line numbers relative to the kernel source a person wrote. ``COMPILES`` counts real compiler
invocations in this process (the cache tests rely on it).

>>> so = compile_c("int two(void) { return 2; }", name="two")   # doctest: +SKIP
"""

from __future__ import annotations

import base64
import functools
import io
import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn
from pathlib import Path

from ..errors import BuildError

# -fno-trapping-math: no program here reads the floating-point exception flags, and without it
# GCC will not turn a select on a float comparison (x > 88.7f ? inf : y) into a blend, so a
# loop holding the branch-free exp, tanh or a clamp stays scalar: "control flow in loop" (GCC
# 12). -fno-math-errno: nor errno, which keeps sqrtf a call for its negative case (a
# `#pragma GCC optimize` in the source does not reliably reach an inlined function). The
# results are the same bits; an exp-and-tanh chain over 16M floats ran 7.5x faster.
C_FLAGS = ("-O3", "-march=native", "-fno-trapping-math", "-fno-math-errno", "-fopenmp",
           "-shared", "-fPIC", "-std=c11", "-fno-diagnostics-show-caret")
C_LIBS = ("-lm",)
COMPILES = {"c": 0, "cuda": 0}


def c_compiler() -> str:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"


@functools.cache
def c_compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return (out.stdout.splitlines() or ["unknown"])[0]
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# glibc's libmvec has SIMD versions of libm functions; GCC calls them from a `#pragma omp simd`
# loop once a declaration says the function has them (glibc's own headers say so only under
# -ffast-math, which would also change what the kernel computes). Which exist depends on the
# glibc (expf since 2.22, tanhf and erff since 2.35), so they are probed once per compiler.
# libmvec's functions are within 4 ulp; a tanh-heavy loop runs about ten times faster.
VECTOR_MATH = {"expf": "float", "logf": "float", "tanhf": "float", "erff": "float",
               "log1pf": "float", "expm1f": "float", "exp2f": "float", "sinf": "float",
               "cosf": "float", "exp": "double", "log": "double", "tanh": "double",
               "erf": "double", "log1p": "double", "expm1": "double", "sin": "double",
               "cos": "double"}
_PROBE = """
void stitch_probe_{fn}(const {t}* restrict x, {t}* restrict y, long n) {{
    #pragma omp simd
    for (long i = 0; i < n; i++) y[i] = {fn}(x[i]);
}}
"""


def vector_math_header(names) -> str:
    """A header that declares ``names`` (keys of VECTOR_MATH) as having SIMD versions."""
    return "#include <math.h>\n" + "".join(
        f'{VECTOR_MATH[n]} {n}({VECTOR_MATH[n]}) __attribute__((simd("notinbranch")));\n'
        for n in names)


_PROBING = threading.Lock()   # the judge builds from several threads; probe once


def vector_math(cc: str) -> tuple[str, ...]:
    """The VECTOR_MATH functions this compiler and C library give SIMD versions of."""
    with _PROBING:
        return _vector_math(cc)


@functools.cache
def _vector_math(cc: str) -> tuple[str, ...]:
    def links(names: list[str]) -> bool:
        with tempfile.TemporaryDirectory(prefix="stitch_mvec_") as tmp:
            (Path(tmp) / "h.h").write_text(vector_math_header(names))
            src = Path(tmp) / "p.c"
            src.write_text("".join(_PROBE.format(fn=n, t=VECTOR_MATH[n]) for n in names))
            try:
                proc = subprocess.run(
                    [cc, *C_FLAGS, "-include", "h.h", "-o", "p.so", str(src), "-lmvec",
                     *C_LIBS, "-Wl,--no-undefined"], capture_output=True, cwd=tmp,
                    timeout=60, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
            except (OSError, subprocess.SubprocessError):
                return False
            return proc.returncode == 0
    every = sorted(VECTOR_MATH)
    if links(every):
        return tuple(every)
    if not links(["expf"]):        # no libmvec at all (another C library, another compiler)
        return ()
    return tuple(n for n in every if links([n]))


# Kernel sources and their flags come from candidates: a build may read only the kernel itself
# and system headers named plainly, so it cannot pull another file (the cache's secret, say)
# into its log or its bytes, nor load a plugin into the compiler. NVRTC reads files as the
# judge: an include named by a macro (``#include P``) is as good as a path. The check reads
# the text whole, literals and comments included (a lexer of its own was put out of step with
# the compiler's by a digit separator, a form feed, a raw-string prefix): an include word after
# a hash in any spelling, wherever it stands, must name a plain header.
_HASH = r"(?:#|%:|\?\?=)[ \t\f\v]*"   # a directive's hash in any spelling, then blanks
_FILE_WORD = re.compile(_HASH + r"(include_next|include|import|embed)\b")
_PLAIN_HEADER = re.compile(r'[ \t\f\v]*(?:<([^<>"\n]*)>|"([^"<>\n]*)")')
# what the check cannot follow, refused wherever it stands: a comment between a hash and the
# directive's name, #line or a line marker at a line's start or after a comment (the compiler
# then quotes the file it names, line by line, in its errors), any has_include (libcu++ wraps
# it in macros of its own), a NUL, a carriage return alone. Token pastes are left alone (a
# "##" in a comment is common): a pasted __has_include asks as the builder's user, who may
# read nothing private (compile_cuda, compile_c).
_UNFOLLOWED = re.compile(r"(?:^|\*/)[ \t\f\v]*" + _HASH + r"(?:/\*|line\b|\d)"
                         r"|has_include|\x00|\r(?!\n)", re.IGNORECASE | re.MULTILINE)
_SPLICE = re.compile(r"(?:\\|\?\?/)[ \t\f\v]*\r?\n")
SOURCE_MAX = 4 << 20   # bytes of kernel source a build takes at most
_C_FLAGS_OK = re.compile(r"-O[0-3sfast]*|-march=[\w-]+|-mtune=[\w-]+|-m(?:no-)?[\w.-]+|"
                         r"-f(?:no-)?(?:fast-math|unroll-loops|tree-vectorize|openmp-simd|"
                         r"strict-aliasing|finite-math-only)|"
                         r"-D(?!\w*has_include)\w+(?:=(?!\w*has_include)[\w.+-]*)?|-U\w+|"
                         r"-std=[\w+]+|-W[\w=-]*|-w|-g\d?|-pthread")
_NVRTC_FLAGS_OK = {"use_fast_math", "max_register_count", "ftz", "prec_div", "prec_sqrt", "fma",
                   "extra_device_vectorization", "define_macro", "debug", "lineinfo",
                   "device_code_optimize", "ptxas_options"}


_PTXAS_OK = re.compile(r"-v|--verbose|-w|--disable-warnings|-O[0-3]|--opt-level=[0-3]|"
                       r"-?-maxrregcount=\d+|-?-fmad=(?:true|false)|"
                       r"--def-(?:load|store)-cache=\w+|-dlcm=\w+|-dscm=\w+|"
                       r"-lineinfo|--generate-line-info|"
                       r"--allow-expensive-optimizations(?:=(?:true|false))?|"
                       r"--warn-on-(?:spills|local-memory-usage|double-precision-use)|"
                       r"-warn-(?:spills|lmem-usage|double-usage)")


def _unfollowed_why(found: str) -> str:
    low = found.lower()
    if "has_include" in low:
        return "__has_include is not allowed (it asks whether a file exists)"
    if "\x00" in found or "\r" in found:
        return "a NUL or a carriage return alone is not allowed in a kernel's source"
    if "line" in low or low.rstrip()[-1:].isdigit():
        return "#line and line markers are not allowed (errors would quote the file named)"
    return "a comment between a directive's # and its name is not allowed"


def check_source(source: str, name: str) -> None:
    """BuildError for a source that may read a file other than a plainly named system header:
    ``#include``, ``include_next``, ``import`` or ``embed`` with anything but ``<name>`` or a
    ``"name"`` without a folder (a macro, a path, ``..``), or naming what lies in the judge's
    own folder (where NVRTC looks for a relative name), and what the check cannot follow
    (``_UNFOLLOWED``). The text is read whole, literals and comments included, in time
    linear in its length. (NVRTC runs as a user of its own too, ``compile_cuda``: a system
    header that includes through a macro the kernel redefines is out of any text's sight.)"""
    if len(source) > SOURCE_MAX:
        raise BuildError(f"kernel {name!r} is over {SOURCE_MAX >> 20} MB of source")
    text = _SPLICE.sub("", source)

    def refuse(at: int, what: str) -> NoReturn:
        line = text.count("\n", 0, at) + 1
        raise BuildError(f"kernel {name!r} line {line}: only system headers named plainly may "
                         f"be included (no paths, no macros, no .incbin): {what!r}",
                         hint="put the code in the kernel's source instead of a file")
    bad = _UNFOLLOWED.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise BuildError(f"kernel {name!r} line {line}: {_unfollowed_why(bad.group(0))}: "
                         f"{text[bad.start():bad.start() + 40].splitlines()[0]!r}",
                         hint="write it another way (the kernel's build reads no other file)")
    for m in _FILE_WORD.finditer(text):
        plain = _PLAIN_HEADER.match(text, m.end())
        what = text[m.start():m.start() + 80].split("\n")[0]
        if plain is None:
            refuse(m.start(), what)
        angle, quoted = plain.group(1), plain.group(2)
        target = angle if angle is not None else quoted
        if (not target or target.startswith("/") or ".." in target or "\\" in target
                or (quoted is not None and "/" in target)
                or os.path.lexists(os.path.join(os.getcwd(), target.split("/")[0]))):
            refuse(m.start(), what)
    bad = re.search(r"\.incbin\b", text, re.IGNORECASE)
    if bad:
        refuse(bad.start(), ".incbin")


def _check_flags(flags: tuple[str, ...], ok, name: str) -> None:
    bad = [f for f in flags if not ok(f)]
    if bad:
        raise BuildError(f"kernel {name!r}: compiler flag(s) not allowed: {', '.join(bad)}",
                         hint="kernels may set optimisation, target, warning and -D flags")


def _as_user(uid: int | None) -> dict[str, Any]:
    """``subprocess`` arguments that run the compiler as ``uid`` with no supplementary groups
    (when this process may switch users). Not a preexec_fn: the judge builds from several
    threads at once (verifier/prebuild.py), where a preexec_fn may deadlock."""
    if uid is None or os.geteuid() != 0:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def _compile(args: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` for a compiler driver, in a session of its own that goes whole
    past ``timeout`` (killing the driver alone left its assembler writing), and unable to
    write a file over twice ARTIFACT_MAX (``.fill`` in a kernel's inline assembly asks the
    assembler for GBs)."""
    most = 2 * ARTIFACT_MAX
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **kw) as proc:
        try:   # set before the driver starts its passes (it forks them after reading args)
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (most, most))
        except (OSError, ValueError):   # gone already, or not this process's to limit
            pass
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def compile_c(source: str, *, name: str = "kernel", flags: tuple[str, ...] = (),
              user: int | None = None) -> bytes:
    """``cc`` with ``C_FLAGS`` and the kernel's own flags, ``-lm`` -> the .so's bytes.

    ``user``: the uid the compiler runs as. The Verifier gives each build a user of its own, in
    a folder only that user may enter: the compiler cannot read what an unprivileged user may
    not, and the candidate's process cannot swap the source while it compiles.
    """
    check_source(source, name)
    _check_flags(flags, _C_FLAGS_OK.fullmatch, name)
    cc = c_compiler()
    with tempfile.TemporaryDirectory(prefix="stitch_cc_", ignore_cleanup_errors=True) as tmp:
        if user is not None and os.geteuid() == 0:
            os.chmod(tmp, 0o700)
            os.chown(tmp, user, user)
        src = Path(tmp) / f"{_safe(name)}.c"
        out = Path(tmp) / f"{_safe(name)}.so"
        src.write_text(source)
        simd = vector_math(cc)
        extra: list[str] = []
        if simd:   # the kernel's libm calls vectorise (VECTOR_MATH); included by us, not it
            (Path(tmp) / "stitch_vector_math.h").write_text(vector_math_header(simd))
            extra = ["-include", "stitch_vector_math.h"]
        COMPILES["c"] += 1
        # the compiler's own temporary files (the assembler's object) in the build's folder,
        # which goes with the build, not in /tmp, where a compiler killed mid-build left them
        run = dict(cwd=tmp, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                 "LC_ALL": "C", "TMPDIR": tmp}, **_as_user(user))
        pre, asm = Path(tmp) / "kernel.i", Path(tmp) / "kernel.s"

        def step(args: list[str], what: str) -> None:
            proc = _compile([cc, *C_FLAGS, *extra, *flags, *args], 300, **run)
            if proc.returncode != 0:
                log = (proc.stdout + proc.stderr).replace(str(src), src.name)
                raise BuildError(f"C kernel {name!r} did not {what}",
                                 log=log.replace(tmp + "/", "").strip(),
                                 hint="fix the lines the compiler names (numbers are the "
                                 "kernel's own)")
        try:
            # preprocessed, compiled to assembly and assembled apart, each checked before the
            # next reads it: what the preprocessor read (whatever macros named it), and what
            # the assembler would read (.incbin, .include, a macro that makes either)
            step(["-E", "-o", str(pre), str(src)], "preprocess")
            _check_preprocessed(pre, tmp, _system_include_dirs(cc), name)
            step(["-S", "-o", str(asm), str(pre)], "compile")
            _check_assembly(asm, name)
            step(["-o", str(out), str(asm), *(["-lmvec"] if simd else []), *C_LIBS],
                 "assemble and link")
        except FileNotFoundError:
            raise BuildError(f"no C compiler found ({cc!r})",
                             hint="install gcc (apt-get install gcc) or set CC") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"C compiler took longer than 300 s on {name}") from None
        if not out.exists():
            raise BuildError(f"C kernel {name!r} did not compile: no library was written")
        if out.stat().st_size > ARTIFACT_MAX:
            raise BuildError(f"C kernel {name!r} is over {ARTIFACT_MAX >> 20} MB compiled")
        return out.read_bytes()


_LINEMARKER = re.compile(r'^#\s*\d+\s+"((?:[^"\\]|\\.)*)"', re.MULTILINE)


@functools.cache
def _system_include_dirs(cc: str) -> tuple[str, ...]:
    """The folders ``cc`` searches for ``<...>`` headers (``-Wp,-v``), each ending in a /."""
    try:
        proc = subprocess.run([cc, "-E", "-Wp,-v", "-x", "c", os.devnull], capture_output=True,
                              text=True, timeout=60, env={"PATH": os.environ.get(
                                  "PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        proc = None
    dirs, listing = [], False
    for line in proc.stderr.splitlines() if proc is not None else []:
        if line.startswith("#include <...> search starts here"):
            listing = True
        elif line.startswith("End of search list"):
            break
        elif listing and line.strip():
            dirs.append(os.path.normpath(line.strip().split(" (")[0]) + os.sep)
    # where the compiler would not say: the usual places of a Linux system's headers
    return tuple(dirs) or ("/usr/include/", "/usr/lib/gcc/", "/usr/local/include/")


PREPROCESSED_MAX = 64 << 20   # bytes of preprocessed kernel the judge reads at most


def _check_preprocessed(path: Path, tmp: str, system: tuple[str, ...], name: str) -> None:
    """BuildError where the preprocessed kernel came from a file other than the kernel, a
    header of ours beside it, or the compiler's system headers (linemarkers name every file
    read), or is too large to read (a macro that doubles itself)."""
    if path.stat().st_size > PREPROCESSED_MAX:
        raise BuildError(f"kernel {name!r} is over {PREPROCESSED_MAX >> 20} MB once "
                         "preprocessed", hint="a macro that expands without end?")
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            m = _LINEMARKER.match(line) if line.startswith("#") else None
            if m is None or m.group(1).startswith("<"):   # <built-in>, <command-line>
                continue
            f = os.path.normpath(os.path.join(tmp, m.group(1)))   # relative: the build folder
            if os.path.dirname(f) == os.path.normpath(tmp) or f.startswith(system):
                continue
            raise BuildError(f"kernel {name!r} read a file that is not a system header: {f}",
                             hint="put the code in the kernel's source instead of a file")


# assembler directives that read a file, or make one of another's name (.irp, a macro)
_ASM_READS = re.compile(r"(?:^|[\s;:])\.(incbin|include|macro|irpc?|rept|altmacro)\b",
                        re.IGNORECASE)


def _check_assembly(path: Path, name: str) -> None:
    """BuildError where the kernel's inline assembly (between #APP and #NO_APP, escapes
    decoded by the compiler) holds a directive that reads a file or builds one."""
    inline = False
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            head = line.strip()
            if head in ("#APP", "#NO_APP"):
                inline = head == "#APP"
            elif inline and (m := _ASM_READS.search(line)):
                raise BuildError(f"kernel {name!r}: the assembler directive .{m.group(1)} is not "
                                 "allowed in inline assembly",
                                 hint="put the data in the kernel's source")


# --- CUDA (NVRTC through cuda.core) -------------------------------------------------------

_NVRTC_LOCK = threading.Lock()   # NVRTC in this process, and every fork: a child forked
# while another thread compiled inherited NVRTC's mutex held, and waited on it for ever


@functools.cache
def _cuda_core():
    with _NVRTC_LOCK:   # a second thread saw cuda.core half imported (no Program yet)
        return _import_cuda_core()


def _import_cuda_core():
    try:
        import cuda.core as cc
        cc.Program  # noqa: B018  (older cuda.core exposes it under .experimental only)
        return cc
    except (ImportError, AttributeError):
        try:
            import cuda.core.experimental as old
            return old
        except ImportError:
            raise BuildError("cuda.core is not installed, so CUDA kernels cannot be compiled",
                             hint="pip install 'stitchcuda-lab[cuda]' (cuda-core, cuda-bindings)"
                             ) from None


@functools.cache
def nvrtc_version() -> str:
    """'nvrtc 13.0 / cuda.core 1.2.0', part of every CUDA cache key."""
    cc = _cuda_core()
    version = "?"
    try:
        from cuda.bindings import nvrtc
        _, major, minor = nvrtc.nvrtcVersion()
        version = f"{major}.{minor}"
    except Exception:  # noqa: BLE001  (an old binding layout: the key stays valid, just coarser)
        pass
    return f"nvrtc {version} / cuda.core {getattr(cc, '__version__', '?')}"


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Toolkit header folders, so kernels may #include <cuda_fp16.h> where headers exist."""
    found = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda_fp16.h").exists():
            found.append(str(Path(root) / "include"))
            if (Path(root) / "include" / "cccl").is_dir():   # CUDA 13: cub, thrust, cuda/std
                found.append(str(Path(root) / "include" / "cccl"))
    try:
        import nvidia  # pip wheels: nvidia/cu13/include, nvidia/cuda_runtime/include
        for base in getattr(nvidia, "__path__", []):
            for hdr in Path(base).glob("*/include/cuda_fp16.h"):
                found.append(str(hdr.parent))
    except ImportError:
        pass
    return tuple(dict.fromkeys(found))


NVRTC_TIMEOUT = 300.0        # seconds one NVRTC build may take in its own process
ARTIFACT_MAX = 256 << 20     # bytes of library or cubin a build may give back
_DEFINE_OK = re.compile(r"(?!\w*has_include)\w+(?:=(?!\w*has_include)[\w.+-]*)?")


def compile_cuda(source: str, *, name: str = "kernel", arch: str,
                 flags: tuple[str, ...] = (), user: int | None = None) -> bytes:
    """NVRTC: ``extern "C" __global__`` device code -> cubin bytes for ``sm_<arch>``.

    Functions without an execution-space annotation are device functions (-default-device).
    A ``#line`` directive keeps the compiler's line numbers those of ``source``.
    ``flags`` are ProgramOptions fields as "key=value" ("use_fast_math=1", "max_register_count=64").

    ``user``: NVRTC is a library, so it compiles in a process forked from this one that
    takes that uid first (as root): what it opens, it opens as that user. A system header
    that includes through a macro the kernel redefines (thrust's) read any file as the judge,
    and the compiler's log gave its lines back.
    """
    check_source(source, name)
    _check_flags(flags, lambda f: f.partition("=")[0] in _NVRTC_FLAGS_OK, name)
    for flag in flags:
        key, _, value = flag.partition("=")
        if key == "ptxas_options" and not all(_PTXAS_OK.fullmatch(o) for o in value.split()):
            # ptxas runs as the judge: --options-file reads a file, and prints what it read
            raise BuildError(f"kernel {name!r}: ptxas option(s) not allowed: {value}",
                             hint="ptxas_options may set -v, -O<n>, --maxrregcount=<n>, "
                             "--fmad, cache defaults and warnings")
        if key == "define_macro" and not _DEFINE_OK.fullmatch(value):
            raise BuildError(f"kernel {name!r}: define_macro not allowed: {value}",
                             hint="define_macro takes NAME or NAME=value (letters, digits, "
                             "_ . + -)")
    cc = _cuda_core()
    COMPILES["cuda"] += 1
    if user is not None and os.geteuid() == 0:
        _nvrtc_loaded(cc, arch)
        cubin = _as_user_in_fork(user, lambda: _nvrtc(cc, source, name, arch, flags), name)
    else:
        with _NVRTC_LOCK:
            cubin = _nvrtc(cc, source, name, arch, flags)
    if len(cubin) > ARTIFACT_MAX:
        raise BuildError(f"CUDA kernel {name!r} is over {ARTIFACT_MAX >> 20} MB compiled")
    return cubin


def _nvrtc(cc: Any, source: str, name: str, arch: str, flags: tuple[str, ...]) -> bytes:
    options: dict[str, Any] = dict(name=_safe(name), arch=f"sm_{arch}", std="c++17",
                                   device_as_default_execution_space=True)
    incs = cuda_include_dirs()
    if incs:
        options["include_path"] = list(incs)
    macros = []
    for flag in flags:
        key, _, value = flag.partition("=")
        if key == "define_macro":
            macros.append(value)   # each one kept (a dict kept the last)
        else:
            options[key] = _option_value(value)
    if macros:
        options["define_macro"] = macros if len(macros) > 1 else macros[0]
    code = f'#line 1 "{_safe(name)}.cu"\n{source}'
    logs = io.StringIO()
    try:
        program = cc.Program(code, code_type="c++", options=cc.ProgramOptions(**options))
        obj = program.compile("cubin", logs=logs)
    except TypeError as e:  # an unknown ProgramOptions field in flags
        raise BuildError(f"bad NVRTC option for {name!r}: {e}",
                         hint="flags are ProgramOptions fields, e.g. use_fast_math=1") from None
    except Exception as e:  # noqa: BLE001  (NVRTCError: the message carries the log)
        raise BuildError(f"CUDA kernel {name!r} did not compile", log=_nvrtc_log(str(e), logs),
                         hint="fix the lines the compiler names (numbers are the kernel's own)"
                         ) from None
    return bytes(obj.code)


_WARM: dict[str, bool] = {}


def _nvrtc_loaded(cc: Any, arch: str) -> None:
    """One fixed kernel compiled here first: NVRTC loads its builtins library at its first
    compile, from where it is installed (a folder the builder's user may not read), so the
    forked builds find it loaded."""
    with _NVRTC_LOCK:
        if not _WARM.get(arch):
            _nvrtc(cc, 'extern "C" __global__ void stitch_warm() {}\n', "warm", arch, ())
            _WARM[arch] = True


def _as_user_in_fork(uid: int, fn: Callable[[], bytes], name: str) -> bytes:
    """``fn()`` in a child forked from this process that has taken ``uid`` (no groups, no
    files it may write, the root folder as its own), its bytes or its BuildError sent back
    through a pipe; killed past ``NVRTC_TIMEOUT`` (a FIFO it opens blocks for ever)."""
    with _NVRTC_LOCK:
        r, w = os.pipe()
        pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        code = 1
        try:
            os.close(r)
            # nothing of the judge's kept open (another build's pipe held open delayed its
            # end; the sandboxes' channels), and no tracing of this copy of its memory
            os.closerange(3, w)
            os.closerange(w + 1, os.sysconf("SC_OPEN_MAX"))
            _not_dumpable()
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.chdir("/")
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
            try:
                msg: dict[str, Any] = {"cubin": base64.b64encode(fn()).decode()}
            except BuildError as e:
                msg = {"error": e.message, "log": e.log, "hint": e.hint}
            except BaseException as e:  # noqa: BLE001
                msg = {"error": f"CUDA kernel {name!r} did not compile: "
                       f"{type(e).__name__}: {e}"}
            view = memoryview(json.dumps(msg).encode())
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks, size = [], 0
    deadline = time.monotonic() + NVRTC_TIMEOUT
    waiting = select.poll()   # not select(): a judge may hold over 1024 descriptors
    waiting.register(r, select.POLLIN | select.POLLHUP)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not waiting.poll(left * 1000):
                raise BuildError(f"CUDA kernel {name!r}: NVRTC took longer than "
                                 f"{NVRTC_TIMEOUT:.0f} s")
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > 2 * ARTIFACT_MAX:
                raise BuildError(f"CUDA kernel {name!r} is over {ARTIFACT_MAX >> 20} MB compiled")
            chunks.append(chunk)
    finally:
        os.close(r)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            status = os.waitpid(pid, 0)[1]
        except ChildProcessError:
            status = 0
    try:
        msg = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        msg = {}
    if "cubin" in msg:
        return base64.b64decode(msg["cubin"])
    ended = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
             else f"status {os.WEXITSTATUS(status)}")
    raise BuildError(str(msg.get("error") or f"CUDA kernel {name!r}: the build's process ended "
                         f"({ended}) with no answer"), log=str(msg.get("log") or ""),
                     hint=msg.get("hint"))


def _not_dumpable() -> None:
    """PR_SET_DUMPABLE 0: no process of the builder's user may trace this one."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _nvrtc_log(message: str, logs: io.StringIO) -> str:
    text = logs.getvalue() or message
    text = text.replace("\x00", "")
    text = re.sub(r"^\d+: NVRTC_ERROR_\w+, compilation log:\s*", "", text.strip())
    return text.strip()


def _option_value(raw: str):
    if raw == "":
        return True
    if raw.lower() in ("true", "yes", "on"):
        return True
    if raw.lower() in ("false", "no", "off"):
        return False
    try:
        return int(raw)
    except ValueError:
        return raw


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"


def passive_openmp() -> None:
    """Our kernels' OpenMP threads sleep between calls instead of spinning.

    The C kernels link the system's libgomp, a second thread pool beside torch's own copy;
    libgomp reads ``OMP_WAIT_POLICY`` once, when the first kernel library loads it (torch's
    pool is set up by then and keeps its policy). Spinning threads of a pool that is not
    running take the cores from torch's pool and from the process's other work (on a small
    shared CPU, milliseconds per call that the kernels' own time does not show); a sleeping
    pool costs a wake-up of microseconds per parallel region. A value the user set is kept.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
