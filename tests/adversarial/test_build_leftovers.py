"""What a candidate's kernel builds could leave behind for the jobs after it.

1. The compiler runs as the candidate's uid + 1 (verify.Job.build). GCC's driver makes its
   temporary files (the assembler's object, ``ccXXXXXX.o``, of whatever size the kernel's
   inline ``.fill`` asks for) in TMPDIR, which was /tmp: a compiler killed mid-build (the
   prebuild phase's cut-off, or a build's timeout, which killed the driver alone) never
   removed them, and a sandbox's end removed only its candidate's own files. Now TMPDIR is
   the build's folder, the compiler goes whole at its timeout and may write no file over
   twice ARTIFACT_MAX (build._compile), and a sandbox's end removes its compiler's files too.
2. Every build a candidate asks for is kept in the kernel cache, which outlives every job:
   a candidate may ask for JOB_BUILDS builds and be handed JOB_BUILD_BYTES of libraries.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stitchcuda_lab.verifier.options import VerifyOptions
from stitchcuda_lab.runtime.build import ARTIFACT_MAX
from stitchcuda_lab.verifier.pool import FIRST_UID
from stitchcuda_lab.verifier.verify import JOB_BUILD_BYTES
from stitchcuda_lab.verifier.worker import Worker

HERE = Path(__file__).parent
POINTWISE = (HERE / "problems" / "pointwise.py").read_text()
GOOD = (HERE / "candidates" / "pass_c_kernel.py").read_text()
OPTIONS = VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="", profile=False,
                        cpu_flush_mb=16)

# At import: one build after another, each a new source (a cache miss) whose inline assembly
# fills 1.2 GB of .data. The assembler writes that object into /tmp (GCC's temporary) before
# the linker reads it; the judge then refuses the library as over 256 MB, and the next build
# starts. Whenever the phase ends, a build is in its assembler or linker.
BUILDS_FOREVER = r'''
import itertools
import torch.nn as nn
from stitchcuda_lab import runtime
SRC = """
__asm__(".data\\n.globl blob_%d\\nblob_%d:\\n.fill 300000000, 4, 0x07070707\\n.text\\n");
int get_%d(void) { return %d; }
"""
for i in itertools.count():
    try:
        runtime.load(SRC % (i, i, i, i), lang="c", name=f"blob{i}")
    except Exception:
        pass

class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''

# At import: six kernels of about 100 MB each (under ARTIFACT_MAX, so each is kept), then a
# plain forward.
CACHE_FILLER = r'''
import torch
import torch.nn as nn
from stitchcuda_lab import runtime
SRC = """
__asm__(".data\\n.globl pad_%d\\npad_%d:\\n.fill 25000000, 4, 0x0b0b0b0b\\n.text\\n");
int get_%d(void) { return %d; }
"""
for i in range(6):
    runtime.load(SRC % (i, i, i, i), lang="c", name=f"pad{i}")

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(2 * x + 1)
'''


def _sandbox_users_files(top: str, since: float) -> list[str]:
    """Entries of ``top`` owned by a sandbox's (or its compiler's) user, made since ``since``."""
    out = []
    for e in os.scandir(top):
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid >= FIRST_UID and st.st_mtime >= since:
            out.append(f"{e.path} (uid {st.st_uid}, {st.st_size} bytes)")
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users exist only as root")
def test_a_compiler_killed_by_the_prebuild_cut_off_leaves_nothing_in_tmp(tmp_path):
    t0 = time.time() - 1
    try:
        with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
            built = w.prebuild(POINTWISE, [GOOD, BUILDS_FOREVER], options=OPTIONS, timeout=15)
            assert built[0]["loaded"], built
            time.sleep(0.5)
            left = _sandbox_users_files("/tmp", t0)
        assert not left, f"files of a sandbox's compiler outlived the prebuild phase: {left}"
    finally:   # not to leave GBs behind for the tests after this one
        for e in os.scandir("/tmp"):
            try:
                st = e.stat(follow_symlinks=False)
                if st.st_uid >= FIRST_UID and st.st_mtime >= t0 and e.is_file(
                        follow_symlinks=False):
                    os.unlink(e.path)
            except OSError:
                pass


def _bytes_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users exist only as root")
def test_one_candidate_cannot_grow_the_kernel_cache_without_bound(tmp_path):
    cache = tmp_path / "cache"
    with Worker("cpu", cache_dir=str(cache)) as w:
        before = _bytes_under(cache)
        v = w.verify(POINTWISE, CACHE_FILLER, replaced=None, options=OPTIONS, timeout=180)
        grown = _bytes_under(cache) - before
    # whatever its verdict (its forward is PyTorch's), what it left in the cache is the point:
    # the budget is checked before each build, so one build more may land
    assert v.status != "pass" and "builds" in (v.reason or "") + v.build_log, v.reason
    assert grown <= JOB_BUILD_BYTES + ARTIFACT_MAX, (f"one candidate ({v.status}) left {grown >> 20} MB in the kernel "
                               "cache, which outlives every job")
