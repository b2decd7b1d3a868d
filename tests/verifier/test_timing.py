"""timing.py: private clocks, tamper detection, the CPU timing structure."""

from __future__ import annotations

import time

import pytest
import torch

from stitchcuda_lab.verifier import timing


def test_tampered_names_replaced_timers_and_restore_puts_them_back(monkeypatch):
    timing.capture()
    assert timing.tampered() == []
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    assert set(timing.tampered()) == {"time.perf_counter", "torch.cuda.synchronize"}
    timing.restore()
    assert timing.tampered() == [] and time.perf_counter is real


def test_time_forward_uses_the_real_clock_even_when_patched(monkeypatch):
    timing.capture()
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)  # a cheat's clock
    r = timing.time_forward(lambda: time.sleep(0.01), [], "cpu", trials=3, warmup=0)
    assert 8.0 < r["ms"] < 500.0 and r["wall_ms"] == r["ms"]


def test_llc_size_is_known_or_defaults():
    assert timing.llc_bytes() >= 1024 * 1024


def test_cpu_timing_runs_exactly_the_trials_asked_for():
    calls = []
    r = timing.time_forward(lambda: calls.append(1), [], "cpu", trials=4, warmup=2)
    assert r["trials"] == 4 and len(calls) == 6


@pytest.mark.gpu
def test_short_cuda_forward_gets_more_trials_and_a_long_one_the_floor():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (run on the GPU machine)")
    timing.capture()
    x = torch.zeros(16, device="cuda")
    short = timing.time_forward(lambda: x.add_(1), [], "cuda", trials=20, warmup=2)
    # a ~0.1 ms trial (flush included): the 100 ms budget buys far more than 20 trials
    assert 100 <= short["trials"] <= timing.MAX_TRIALS
    slow = timing.time_forward(lambda: torch.cuda._sleep(300_000_000), [], "cuda", trials=3,
                               warmup=0)   # over 100 ms per call
    assert slow["trials"] == 3
