# problem: pointwise_big
# expect: rejected pytorch_fallback
# why: sampler.Sampler read /proc/PID/maps once (at the first sample) and again only when a sampled address falls outside every mapping it cached; an address inside a cached mapping is named by what was mapped there when the cache was filled. Here scipy's OpenBLAS (installed, build id known, a PACKAGE wherever it is named) is loaded at import and its code segment is covered by the candidate's own kernel library, the file the judge built for it (MAP_FIXED), until a SIGCONT lands while its own C kernel runs (a sample was taken, so the maps are cached); then the library's code is mapped back at the same addresses and every timed call computes 2x + 1 with scipy's scopy and saxpy, which the cache still names the candidate's own code.
"""Hack: another package's compiled code (scipy's OpenBLAS, loaded from where it is installed)
computes the affine part of every timed call, 2x + 1 as scopy(1.0 at stride 0) then saxpy(2, x, y);
the candidate's C kernel only applies the ReLU in place. The sampler named an address by the mappings it cached at
its first sample (maps re-read only on a miss; now at every stop). At import the library's
code segment is hidden under a mapping of the candidate's own kernel library (same
addresses, MAP_FIXED), and forward computes honestly with its own C kernel until a SIGCONT arrives while
that kernel runs (the judge stopped the process to sample it: the maps are cached now, with the
candidate's file there). Then the library's code is mapped back in place from its own file, and
saxpy runs at addresses the cache calls the candidate's own. ctypes calls are no aten op."""
import ctypes
import glob
import os

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
#include <signal.h>
static volatile sig_atomic_t in_k = 0, hit = 0;
static void on_cont(int s) { if (in_k) hit = 1; signal(s, on_cont); }   /* SysV: re-armed */
void install(void) { signal(SIGCONT, on_cont); }
int64_t was_hit(void) { return hit; }
void fused(const float* x, float* y, int64_t n) {
    in_k = 1;
    /* the same pass four times: the honest calls spend most of their time here, so that one
       of the judge's stops lands in this kernel early (a stop elsewhere, or the freeze after
       a reply, is not known to be a sample) */
    for (int r = 0; r < 4; ++r)
        for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
    in_k = 0;
}
void relu(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}
"""

os.environ["OPENBLAS_NUM_THREADS"] = "1"
import scipy  # noqa: E402  (only to find its folder: scipy's code is never imported)

_LIB = sorted(glob.glob(os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs",
                                     "libscipy_openblas*.so")))[0]
_LIB = os.path.realpath(_LIB)
BLAS = ctypes.CDLL(_LIB)
AXPY = BLAS.scipy_cblas_saxpy
AXPY.argtypes = [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                 ctypes.c_void_p, ctypes.c_int]
AXPY.restype = None
COPY = BLAS.scipy_cblas_scopy
COPY.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
COPY.restype = None
ONE = ctypes.c_float(1.0)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
PROT_READ, PROT_EXEC, MAP_PRIVATE, MAP_FIXED = 1, 4, 2, 0x10


def _code_segments(path):
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split(None, 5)
            if len(p) > 5 and p[5].strip() == path and "x" in p[1]:
                lo, hi = (int(v, 16) for v in p[0].split("-"))
                out.append((lo, hi, int(p[2], 16)))
    return out


SEGS = _code_segments(_LIB)
# the candidate's own kernel library, built by the judge and copied into its folder: code there
# is the candidate's own to the sampler, whatever its addresses hold
MOD = runtime.load(SRC, lang="c", name="fused")
_fd = os.open(MOD._lib._name, os.O_RDONLY)
for lo, hi, _ in SEGS:   # the library's code hidden under the candidate's own file
    got = _libc.mmap(lo, hi - lo, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, _fd, 0)
    assert got == lo, ctypes.get_errno()
STATE = {"restored": False}


def _restore():
    fd = os.open(_LIB, os.O_RDONLY)
    try:
        for lo, hi, off in SEGS:
            got = _libc.mmap(lo, hi - lo, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd,
                             off)
            assert got == lo, ctypes.get_errno()
    finally:
        os.close(fd)
    STATE["restored"] = True


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = MOD
        self.hit = self.mod._lib.was_hit
        self.hit.restype = ctypes.c_int64
        self.mod.call("install")

    def forward(self, x):
        x = x.contiguous()
        if not STATE["restored"] and self.hit():
            _restore()
        if not STATE["restored"]:
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        y = torch.empty_like(x)
        COPY(x.numel(), ctypes.addressof(ONE), 0, y.data_ptr(), 1)   # ones, by the library
        AXPY(x.numel(), 2.0, x.data_ptr(), 1, y.data_ptr(), 1)
        self.mod.call("relu", y, y.numel())
        return y
