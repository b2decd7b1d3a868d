"""Kernel-cache poisoning: an entry planted under another program's key, with a matching hash
file, is never loaded (offline, CPU, a C kernel); and a poisoning candidate run through the real
Worker does not change the verdict of a later, unchanged, correct program that shares the cache.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
from pathlib import Path

import pytest
import torch

from stitchcuda_lab.runtime import build, kernels
from stitchcuda_lab.runtime.cache import KernelCache
from stitchcuda_lab.verifier.options import VerifyOptions
from stitchcuda_lab.verifier.worker import Worker

HERE = Path(__file__).parent
GOOD = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
EVIL = GOOD.replace("2.0f * x[i] + 1.0f", "0.5f * x[i]")


def _key(source: str) -> str:
    cc = build.c_compiler()
    return KernelCache.key(lang="c", source=source, flags=(), cc=cc,
                           cc_version=build.c_compiler_version(cc), arch=kernels._host_arch(),
                           torch=kernels._torch_version())


def _run(path: Path) -> torch.Tensor:
    lib = ctypes.CDLL(str(path))
    x = torch.linspace(-2, 2, 16)
    y = torch.empty_like(x)
    lib.fused(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_int64(16))
    return y


@pytest.mark.parametrize("mac", ["none", "zeros", "other_secret"])
def test_planted_entry_with_matching_hash_is_never_loaded(tmp_path, mac):
    cache = KernelCache(tmp_path / "kc")
    evil_so = build.compile_c(EVIL, name="fused")
    key = _key(GOOD)
    art = cache.path(key, ".so")
    art.parent.mkdir(parents=True, exist_ok=True)
    art.write_bytes(evil_so)
    digest = hashlib.sha256(evil_so).hexdigest()
    info = {"sha256": digest, "size": len(evil_so), "name": "fused", "lang": "c"}
    if mac == "zeros":
        info["mac"] = "0" * 64
    elif mac == "other_secret":   # an HMAC made with a secret of the planter's own
        import hmac
        info["mac"] = hmac.new(b"x" * 32, f"{key}:{digest}".encode(), hashlib.sha256).hexdigest()
    art.with_suffix(".json").write_text(json.dumps(info))

    assert cache.get(key, ".so") is None
    before = build.COMPILES["c"]
    path = kernels.build_cached("c", GOOD, "fused", (), kernels._host_arch(), cache=cache)
    assert build.COMPILES["c"] == before + 1          # rebuilt, not loaded
    assert Path(path).read_bytes() != evil_so
    x = torch.linspace(-2, 2, 16)
    assert torch.equal(_run(Path(path)), torch.relu(2 * x + 1))
    # and the rebuilt entry is the one later readers get
    again = kernels.build_cached("c", GOOD, "fused", (), kernels._host_arch(), cache=cache)
    assert build.COMPILES["c"] == before + 1 and Path(again).read_bytes() != evil_so


OPTS = VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="", profile=False,
                     cpu_flush_mb=16)


@pytest.mark.parametrize("poisoner", ["cache_race_swap_source", "cache_plant_with_hash"])
def test_a_poisoning_candidate_does_not_change_a_later_verdict(tmp_path, poisoner):
    """The poisoner targets pass_c_kernel.py's exact kernel source; afterwards, in the same
    cache and in a fresh worker (a separate run), that unchanged program must still pass."""
    problem = (HERE / "problems" / "pointwise.py").read_text()
    cache = str(tmp_path / "cache")
    with Worker("cpu", cache_dir=cache) as w:
        w.verify(problem, (HERE / "candidates" / f"{poisoner}.py").read_text(), replaced=None,
                 options=OPTS, timeout=120)
    with Worker("cpu", cache_dir=cache) as w:
        v = w.verify(problem, (HERE / "candidates" / "pass_c_kernel.py").read_text(),
                     replaced=None, options=OPTS, timeout=120)
    assert v.status == "pass", v.reason
