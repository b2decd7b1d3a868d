"""What generated ModelNew programs import: compile (cached) and launch kernels on torch tensors.

The package holds everything a candidate program may use and nothing that judges it: kernel
loading and launching (kernels.py), the compilers (build.py), the content-addressed kernel
cache (cache.py) and fp32-accurate GEMMs on tensor cores (gemm.py). The Verifier lives in
``stitchcuda_lab.verifier`` and is never imported from here.

>>> from stitchcuda_lab import runtime
>>> mod = runtime.load(SOURCES["fused_0"], lang="cuda", name="fused_0")     # doctest: +SKIP
>>> mod.launch("fused_0", grid=(g, 1, 1), block=(256, 1, 1), args=(x, out, n, 1.5))
>>> cmod = runtime.load(C_SRC, lang="c", name="fused_0")                    # doctest: +SKIP
>>> cmod.call("fused_0", x, out, n, 1.5)
"""

from ..errors import BuildError
from . import gemm
from .kernels import CModule, CudaModule, clear_loaded, f64, i32, load, load_group, sm_count

__all__ = ["load", "load_group", "i32", "f64", "sm_count", "CModule", "CudaModule", "clear_loaded",
           "BuildError", "gemm"]
