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
