"""Shared test set-up: GPU tests skip without CUDA; every test gets its own sessions/cache roots."""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def fast_settings(root):
    """Settings under ``root`` (sessions and kernel cache), with fast test defaults: among
    them a CPU flush of 16 MB before each timed call, where this machine's default (twice
    its reported 300 MB cache, 256 MB at most) was most of a verification's CPU time. The
    notebooks and test_clocks keep the default."""
    from stitchcuda_lab.settings import Settings
    return Settings(sessions_dir=str(root / "sessions"), cache_dir=str(root / "cache"),
                    device="cpu", trials=5, timing_trials=5, warmup=1, compile_modes="",
                    timeout=120.0, profile=False, cpu_flush_mb=16)


@pytest.fixture(scope="session")
def make_settings():
    """``fast_settings`` for fixtures of wider scope than a test (a conftest is not importable by
    name: under xdist another folder's conftest may hold the name ``conftest``)."""
    return fast_settings


@pytest.fixture
def settings(tmp_path):
    """Settings isolated to a temporary sessions root and kernel cache, fast test defaults."""
    return fast_settings(tmp_path)
