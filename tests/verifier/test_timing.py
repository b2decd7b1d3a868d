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


def test_a_cpu_flush_writes_the_size_asked_for_else_twice_the_cache_at_most_256_mb():
    auto = min(2 * timing.llc_bytes(), 256 << 20)
    assert timing.cpu_flush_bytes(0) == auto and timing.cpu_flush_bytes(16) == 16 << 20
    assert timing.Timer("cpu").size == auto
    t = timing.Timer("cpu", 16)
    assert t._buf is None   # made at the first flush: a candidate's process makes none
    t.flush()
    assert t._buf.numel() * 4 == 16 << 20 and bool((t._buf == 1.0).all())
    t.flush()
    assert bool((t._buf == 2.0).all())   # every flush writes it all


def test_the_flush_size_is_a_setting_and_a_negative_one_is_refused():
    from stitchcuda_lab.errors import ConfigError
    from stitchcuda_lab.settings import Settings
    from stitchcuda_lab.verifier.options import VerifyOptions
    s = Settings.from_env({"STITCH_CPU_FLUSH_MB": "16"})
    assert VerifyOptions.from_settings(s).cpu_flush_mb == 16
    with pytest.raises(ConfigError, match="cpu_flush_mb=-1 is negative"):
        Settings.from_env({"STITCH_CPU_FLUSH_MB": "-1"})


def test_the_judge_keeps_one_flush_buffer_from_call_to_call(tmp_path):
    # a Timer per timed call faulted in a fresh buffer each time (65,536 pages at 256 MB)
    from stitchcuda_lab.verifier.verify import WorkerState
    state = WorkerState(device="cpu", workdir=tmp_path)
    first = state.timer(16)
    assert state.timer(16) is first and first.size == 16 << 20
    other = state.timer(0)
    assert other is not first and state.timers == {0: other}   # one buffer held at a time


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


def test_the_sandboxs_timer_takes_away_a_hook_the_forward_installs_before_its_end_reading():
    """A profile function installed by the timed function sees no event after the timer's
    end reading (the return of ``Timer.call``): it is gone before it."""
    import sys

    from stitchcuda_lab.verifier.timing import Timer
    seen = []

    def hook(frame, event, arg):
        seen.append((event, frame.f_code.co_name))

    def forward():
        sys.setprofile(hook)
        return 1

    before = sys.getprofile()
    try:
        _, _, out = Timer("cpu", drop_hooks=True).call(forward, flush=False)
        assert out == 1 and sys.getprofile() is None
        assert ("return", "call") not in seen, seen
        # the judge's own timer leaves hooks alone (a debugger's, coverage's)
        Timer("cpu").call(forward, flush=False)
        assert sys.getprofile() is hook
    finally:
        sys.setprofile(before)
