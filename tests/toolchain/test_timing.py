"""timing.py: private clocks, tamper detection, the CPU timing structure."""

from __future__ import annotations

import time

import torch

from stitchcuda_lab.toolchain import timing


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
