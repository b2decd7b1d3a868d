"""Small problems and candidates shared by the Verifier tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fast_options():
    from stitchcuda_lab.verifier.options import VerifyOptions
    return VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="", profile=False,
                         cpu_flush_mb=16)


@pytest.fixture
def cpu_worker(tmp_path):
    from stitchcuda_lab.verifier.worker import Worker
    w = Worker("cpu", cache_dir=str(tmp_path / "cache"))
    yield w
    w.close()


@pytest.fixture(scope="module")
def module_worker(tmp_path_factory):
    """One CPU worker for a module's tests that only read verdicts: starting a judge costs
    about ten seconds on two cores, a verdict a few. Every candidate still gets a process of
    its own; tests of the worker's own life (crashes, reuse, closing) use ``cpu_worker``."""
    from stitchcuda_lab.verifier.worker import Worker
    w = Worker("cpu", cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield w
    w.close()
