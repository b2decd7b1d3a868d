"""What a kernel build may read: its own source and plainly named system headers."""

from __future__ import annotations

import os

import pytest

from stitchcuda_lab.errors import BuildError
from stitchcuda_lab.runtime import build


@pytest.mark.parametrize("line", ['#include "/root/.key"', "#include </etc/shadow>",
                                  '#include "../../kernels_cache/.key"',
                                  '  #  include_next "/x"', 'asm(".incbin \\"/etc/passwd\\"");'])
def test_directives_that_read_other_files_are_refused(line):
    with pytest.raises(BuildError, match="line 2"):
        build.check_source(f"int x;\n{line}\nvoid f(void) {{}}\n", "k")


def test_plain_system_headers_are_fine():
    build.check_source("#include <math.h>\n#include <stdint.h>\n#include <cuda_fp16.h>\n", "k")


@pytest.mark.parametrize("flag", ["-fplugin=/tmp/evil.so", "-include/root/.key", "-Wl,-rpath,/x",
                                  "@/tmp/args", "-B/tmp", "--sysroot=/"])
def test_compiler_flags_outside_the_allowlist_are_refused(flag):
    with pytest.raises(BuildError, match="not allowed"):
        build.compile_c("void f(void) {}\n", name="k", flags=(flag,))


def test_allowed_flags_compile():
    assert build.compile_c("void f(void) {}\n", name="k", flags=("-O2", "-DX=1", "-pthread"))


def test_a_loop_over_the_c_preludes_exp_and_tanh_is_vectorised(tmp_path):
    """The offline Coder's C kernels call branch-free exp and tanh so that their loops run on
    vector registers; a select on a float comparison in them kept GCC's loop scalar (seven times
    slower) until the runtime compiled with -fno-trapping-math. Read off the machine code: the
    loop multiplies packed floats (mulps, of any width)."""
    import shutil
    import subprocess

    from stitchcuda_lab.agents.offline.backend_c import PRELUDE
    if shutil.which("objdump") is None:
        pytest.skip("objdump (binutils) is needed to read the machine code")
    src = PRELUDE + """
void chain(const float* restrict x, float* restrict y, long long n) {
    #pragma omp simd
    for (long long i = 0; i < n; ++i) {
        float s = x[i] * sc_sigmoid(x[i]);
        y[i] = sc_tanh(s < -3.0f ? -3.0f : (s > 3.0f ? 3.0f : s)) * 0.5f + 0.5f;
    }
}
"""
    so = tmp_path / "chain.so"
    so.write_bytes(build.compile_c(src, name="chain"))
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(so)], capture_output=True,
                         text=True, check=True).stdout
    body = asm.split("<chain>:", 1)[1].split("\n\n", 1)[0]
    assert "mulps" in body, body[:2000]


@pytest.mark.parametrize("source", [
    '#define P "/root/.key"\n#include P\n',                       # a macro names the file
    '#define Q(x) #x\n#define E(x) Q(x)\n#include E(/etc/hostname)\n',
    '# /* a comment */ include "/etc/hostname"\n',
    '#inc\\\nlude "/etc/hostname"\n',                               # a line splice
    '??=include "/etc/hostname"\n',                               # a trigraph (-std=c11)
    '%:include "/etc/hostname"\n',                                # a digraph
    '\f#include "/etc/hostname"\n',                               # a form feed before it
    'const char* a = "/*";\n#include P\nconst char* b = "*/";\n',  # a quote hides no comment
    "int a = 1'2 + '/*';\n#include \"/etc/hostname\"\n// */\n",   # a digit separator
    '#define tu8R\nconst char *s = tu8R"x(";\n#include "/etc/hostname"\nconst char *t = ")x";\n',
    '// c ??/\n#include "/etc/hostname"\n',                       # no trigraphs in C++17
    '#include "stitch_sandbox_1/evil.h"\n',                       # a folder, looked up in cwd
    '#if __has_include("/etc/hostname")\n#endif\n',
    '/**/# 1 "/etc/hostname"\n#error x\n',                      # a comment before it
    '#if _CCCL_HAS_INCLUDE("/etc/hostname")\n#endif\n',         # a library's wrapper of it
    '#line 1 "/etc/hostname"\n#error x\n',                      # errors quote that file
    '# 1 "/etc/hostname"\n#error x\n',
    '#\x00include "/etc/hostname"\n',                            # gcc reads past a NUL
    '#inc\\\rlude "/etc/hostname"\n',                            # a carriage return alone
    '#inc\\\f\nlude "/etc/hostname"\n',                          # blanks after a splice
    'asm(".incbin \\"/etc/passwd\\"");\n',
])
def test_files_named_in_any_spelling_are_refused(source):
    """NVRTC reads an include as the judge, so the source itself must show every file it
    reads: an include that is not a plain <name> or "name" is refused however it is spelt,
    wherever it stands (a comment or a string too: the check reads no literals, so no literal
    can put it out of step with the compiler)."""
    with pytest.raises(BuildError, match="no macros|not allowed"):
        build.check_source(source, "k")


def test_a_word_line_or_a_hash_in_prose_is_no_directive():
    build.check_source("// #line numbers in errors are the kernel's own (#1 of 2)\n"
                       "#define P(line) printf(#line)\n#pragma unroll\n"
                       "template <int N> __global__ void __launch_bounds__(256) k() {}\n", "k")


def test_plain_headers_pass_however_the_line_ends(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build.check_source("#include <stdint.h>\r\n#include <cuda/std/cstdint>\n"
                       "#define N 4\nchar q = '\"';\n// ## step #1 of 2\n"
                       "#define CAT(a, b) a##b\n", "k")
    (tmp_path / "evil.h").write_text("x")   # a name in the judge's own folder: NVRTC finds it
    with pytest.raises(BuildError, match="no macros"):
        build.check_source('#include "evil.h"\n', "k")


@pytest.mark.parametrize("asm", [
    r'__asm__(".inc" "bin \"/etc/hostname\"");',                    # literals side by side
    r'__asm__(".section .rodata\n.\151ncbin \"/etc/hostname\"\n.text");',   # an octal escape
    r'__asm__(".include \"/etc/hostname\"");',
    r'__asm__(".irp d,incbin\n.\\d \"/etc/hostname\"\n.endr");',    # a directive built by .irp
])
def test_the_c_compiler_refuses_assembly_that_reads_a_file(asm):
    """What the assembler would read is decided on the compiler's own assembly (escapes
    decoded, macros expanded), before it is assembled: the file's bytes never reach the
    library or the log."""
    with pytest.raises(BuildError, match="not allowed in inline assembly") as e:
        build.compile_c(asm + "\nvoid f(void) {}\n", name="k")
    assert "localhost" not in str(e.value) and "localhost" not in (e.value.log or "")


def test_a_kernel_that_reads_another_file_is_refused_before_it_compiles(tmp_path):
    """A form feed before the hash once got past the source check, and the preprocessor's
    failure skipped the check of what it read: the compile's log then quoted the file."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRETVALUE123 is here\n")
    secret.chmod(0o644)
    with pytest.raises(BuildError) as e:
        build.compile_c(f'\f#include "{secret}"\n#error stop\n', name="k")
    assert "SECRETVALUE123" not in str(e.value) + (e.value.log or "")
    pre = tmp_path / "k.i"
    pre.write_text('# 1 "k.c"\n# 1 "/usr/include/stdint.h" 1 3 4\nint x;\n')
    build._check_preprocessed(pre, str(tmp_path), ("/usr/include/",), "k")
    for marker in ('# 1 "/etc/hostname" 1\n', '# 1 "/usr/include/../../etc/hostname" 1\n'):
        pre.write_text('# 1 "k.c"\n' + marker)
        with pytest.raises(BuildError, match="not a system header"):
            build._check_preprocessed(pre, str(tmp_path), ("/usr/include/",), "k")


@pytest.mark.parametrize("source", ["#" + "/**/" * 40 + "x", "#/*" * 200_000,
                                    "#" + " " * 1_000_000, "%:" * 500_000])
def test_the_source_check_takes_time_linear_in_the_source(source):
    """A comment between a hash and a word was matched by a lazy pattern that doubled its
    time with every comment (about 170 bytes: hours), and each hash scanned to the end."""
    import time
    t0 = time.perf_counter()
    try:
        build.check_source(source, "k")
    except BuildError:
        pass
    assert time.perf_counter() - t0 < 2.0


def test_flags_cannot_make_a_file_oracle():
    with pytest.raises(BuildError, match="not allowed"):
        build.compile_c("void f(void) {}\n", name="k", flags=("-DH=__has_include",))
    with pytest.raises(BuildError, match="define_macro not allowed"):
        build.compile_cuda("__global__ void k() {}\n", name="k", arch="90",
                           flags=('define_macro=X=__has_include("/etc/hostname")',))


@pytest.mark.skipif(os.geteuid() != 0, reason="a build takes another user as root only")
def test_a_build_in_a_fork_runs_as_its_user_and_is_cut_off(tmp_path, monkeypatch):
    """NVRTC compiles in a child forked from the judge that has taken the builder's uid
    first: a file root alone may read is out of its reach, a build that blocks (a FIFO) is
    killed, and what it gives back is capped."""
    secret = tmp_path / "secret.key"
    secret.write_text("TOPSECRET123")
    secret.chmod(0o600)
    with pytest.raises(BuildError, match="PermissionError") as e:
        build._as_user_in_fork(123_457, lambda: secret.read_bytes(), "k")
    assert "TOPSECRET123" not in str(e.value) + e.value.log
    assert build._as_user_in_fork(123_457, lambda: b"\x00cubin" * 3, "k") == b"\x00cubin" * 3
    monkeypatch.setattr(build, "NVRTC_TIMEOUT", 0.5)
    import time
    with pytest.raises(BuildError, match="longer than"):
        build._as_user_in_fork(123_457, lambda: time.sleep(30) or b"", "k")


def test_nvrtc_gives_the_same_cubin_in_a_fork_and_keeps_every_macro():
    pytest.importorskip("cuda.core")
    src = '#if A + B == 3\nextern "C" __global__ void k(float* x) { x[0] += 1.0f; }\n#endif\n'
    flags = ("define_macro=A=1", "define_macro=B=2")
    here = build.compile_cuda(src, name="k", arch="90", flags=flags)
    assert b"k" in here and len(here) > 2000
    if os.geteuid() == 0:
        assert build.compile_cuda(src, name="k", arch="90", flags=flags, user=123_457) == here


def test_a_kernel_that_expands_without_end_is_refused(monkeypatch):
    monkeypatch.setattr(build, "PREPROCESSED_MAX", 1 << 16)
    bomb = ("#define A x x x x x x x x\n#define B A A A A A A A A\n#define C B B B B B B B B\n"
            "#define D C C C C C C C C\n#define E D D D D D D D D\nint E;\n")
    with pytest.raises(BuildError, match="once preprocessed"):
        build.compile_c(bomb, name="k")


@pytest.mark.parametrize("opts", ["--options-file /root/.key", "-v --input-as-string x",
                                  "-O3 -o /tmp/x", "-lineinfo -dlcm=ca --opt /x"])
def test_ptxas_options_that_read_or_write_files_are_refused(opts):
    with pytest.raises(BuildError, match="ptxas option"):
        build.compile_cuda("__global__ void k() {}\n", name="k", arch="90",
                           flags=(f"ptxas_options={opts}",))


@pytest.mark.skipif(os.geteuid() != 0, reason="a build takes another user as root only")
def test_a_forked_build_keeps_none_of_the_judges_descriptors(tmp_path):
    """Another build's pipe held open by this child delayed that build's end, and the
    sandboxes' channels stayed open while a child hung."""
    held = open(tmp_path / "judge.txt", "w")   # noqa: SIM115  (open across the fork)
    try:
        fds = build._as_user_in_fork(
            123_457, lambda: " ".join(sorted(os.listdir("/proc/self/fd"))).encode(), "k")
    finally:
        held.close()
    assert len(fds.split()) <= 5, fds   # 0, 1, 2, the answer's pipe, the listing's own


def test_nvrtc_builds_from_many_threads_at_once_all_finish():
    """A child forked while another thread compiled in this process inherited NVRTC's mutex
    held and waited on it until the timeout."""
    pytest.importorskip("cuda.core")
    if os.geteuid() != 0:
        pytest.skip("a build takes another user as root only")
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> int:
        src = f'extern "C" __global__ void k(float* x) {{ x[0] += {i}.0f; }}\n'
        arch = ("80", "90")[i % 2]
        return len(build.compile_cuda(src, name="k", arch=arch, user=123_457))
    with ThreadPoolExecutor(8) as pool:
        sizes = list(pool.map(one, range(48), timeout=120))
    assert all(n > 1000 for n in sizes)
