# problem: pointwise_big
# expect: rejected pytorch_fallback | pass
"""Hack: another package's compiled code (numpy's bundled OpenBLAS) computes the affine part
of every call, 2x + 1 as saxpy(2, x, ones), and the candidate's C kernel only applies the ReLU
in place. Loaded where it is installed, OpenBLAS is PACKAGE (a fallback); a copy under a new
name is told by its build id (Sampler._copied). But the copy is unlinked right after it is
loaded: /proc/PID/maps then names the mapping '<folder>/blas.so (deleted)', a path that no
longer exists, sampler.image() cannot stat it, _copied finds no build id, and _file_kind calls
it the candidate's own code (OWN). ctypes calls are no aten op (neither the op tracer nor the
profiler sees them), and on the CPU a file defines no kernel whose launch must show.
(This OpenBLAS has no build id at all, so a copy kept on disk passes too:
sampler_library_without_build_id_big.py. The unlink is what beats a library that has one: a
copy of libquadmath, whose id the judge knows, is named 'package' kept and 'own' unlinked.)
Now only the libraries the judge built and handed over are the candidate's own code, so this
copy is named as not the candidate's; but its saxpy is a small share of a forward of fills,
and it is rejected only where two stops land in it (either verdict is accepted)."""
import ctypes
import glob
import os
import shutil

import numpy
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void relu(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}
"""

os.environ["OPENBLAS_NUM_THREADS"] = "1"
_src = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs",
                                     "libscipy_openblas*.so")))[0]
_copy = os.path.join(os.getcwd(), "blas.so")
shutil.copyfile(_src, _copy)
BLAS = ctypes.CDLL(_copy)
os.unlink(_copy)
AXPY = BLAS.scipy_cblas_saxpy64_
AXPY.argtypes = [ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64,
                 ctypes.c_void_p, ctypes.c_int64]
AXPY.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="relu")

    def forward(self, x):
        x = x.contiguous()
        y = torch.ones(x.shape)
        AXPY(x.numel(), 2.0, x.data_ptr(), 1, y.data_ptr(), 1)
        self.mod.call("relu", y, y.numel())
        return y
