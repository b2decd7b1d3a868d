"""What a kernel build may read: its own source and plainly named system headers."""

from __future__ import annotations

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
    'const char* a = "/*";\n#include P\nconst char* b = "*/";\n',  # a quote hides no comment
    'asm(".inc" "bin \\"/etc/hostname\\"");\n',                   # literals side by side
    'asm(".INC\\\nBIN \\"/etc/hostname\\"");\n',
])
def test_files_named_in_any_spelling_are_refused(source):
    """NVRTC reads an include as the judge, so the source itself must show every file it
    reads: an include that is not a plain <name> or "name" is refused however it is spelt."""
    with pytest.raises(BuildError, match="no macros"):
        build.check_source(source, "k")


def test_a_directive_inside_a_comment_or_a_raw_string_is_none():
    build.check_source('/* #include "/etc/hostname" */\n// #include P\n'
                       'const char* s = R"x(\n#include "/etc/hostname"\n)x";\n', "k")


def test_the_c_compiler_refuses_what_macros_make_of_the_source(tmp_path):
    """What the preprocessor read and wrote decides for C: a token paste that makes .incbin
    gets past any reading of the source, not past its linemarkers and output."""
    source = ('#define S(x) #x\n#define XS(x) S(x)\n#define CAT(a, b) a##b\n'
              'asm(XS(CAT(.inc, bin)) " \\"/etc/hostname\\"");\nvoid f(void) {}\n')
    build.check_source(source, "k")
    with pytest.raises(BuildError, match="incbin"):
        build.compile_c(source, name="k")
    build._check_preprocessed('# 1 "k.c"\n# 1 "/usr/include/stdint.h" 1 3 4\nint x;\n',
                              str(tmp_path), ("/usr/include/",), "k")
    with pytest.raises(BuildError, match="not a system header: /etc/hostname"):
        build._check_preprocessed('# 1 "k.c"\n# 1 "/etc/hostname" 1\nhost\n', str(tmp_path),
                                  ("/usr/include/",), "k")
    with pytest.raises(BuildError, match="not a system header"):
        build._check_preprocessed('# 1 "/usr/include/../../etc/hostname" 1\n', str(tmp_path),
                                  ("/usr/include/",), "k")


@pytest.mark.parametrize("opts", ["--options-file /root/.key", "-v --input-as-string x",
                                  "-O3 -o /tmp/x"])
def test_ptxas_options_that_read_or_write_files_are_refused(opts):
    with pytest.raises(BuildError, match="ptxas option"):
        build.compile_cuda("__global__ void k() {}\n", name="k", arch="90",
                           flags=(f"ptxas_options={opts}",))
