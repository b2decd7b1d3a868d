"""Small problems and candidates shared by the Verifier tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fast_options():
    from stitchcuda_lab.verifier.options import VerifyOptions
    return VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="", profile=False)


@pytest.fixture
def cpu_worker(tmp_path):
    from stitchcuda_lab.verifier.worker import Worker
    w = Worker("cpu", cache_dir=str(tmp_path / "cache"))
    yield w
    w.close()
