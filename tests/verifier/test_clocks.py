"""The judge's clock bounds the time a candidate reports: a lying timer claims nothing faster.

A candidate that forges its timing replies (every timed call claims 2% of what it took, on the
way out through channel.send, where no watch list looks) is either rejected as
``patched_timer`` or timed at what the judge's own clock saw, never at its claim.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

ADV = Path(__file__).parent.parent / "adversarial"
BIG = (ADV / "problems" / "pointwise_big.py").read_text()
SMALL = (ADV / "problems" / "pointwise.py").read_text()
# the adversarial candidate that rewrites its replies (every timed call claims 2% of its
# time), here with a forward of tens of milliseconds over kilobytes of inputs: the lie is far
# past the clock's slack and the path's spread (on a 2-core host a path of 12-16 ms moving
# 16 MB each way hides a lie about a 2 ms forward: RELIABILITY.md's limits)
LIAR = (ADV / "candidates" / "channel_send_rewrite_slow.py").read_text()


def test_a_timer_that_claims_two_percent_gets_no_faster_time(module_worker, fast_options):
    liar = module_worker.verify(SMALL, LIAR, replaced=None, options=fast_options, timeout=120)
    if liar.status == "rejected":
        assert liar.reason.startswith("patched_timer"), liar.reason
        return
    assert liar.status == "pass", liar.reason
    # ours_wall is the median of what it claimed; ours is what the judge's clock saw: about
    # fifty times more (compared within one verdict, so load on the host cancels out)
    assert liar.timings["ours"] > 3 * liar.timings["ours_wall"], liar.timings


PAUSE = (ADV / "candidates" / "channel_send_rewrite_until_a_pause.py").read_text()


def test_a_timer_that_lies_until_the_judge_waits_gets_no_faster_time(module_worker,
                                                                     fast_options):
    """The judge waits before its last rounds for load to pass (CLOCK_RETRY_WAITS_S); a timer
    that lies until it sees that pause, then tells the truth, is let through, timed by the
    judge's clock (on its first round's calls, or on the calls timed again after the pause,
    where it tells the truth): about its honest twin's time, not the 2% it claimed."""
    liar = module_worker.verify(SMALL, PAUSE, replaced=None, options=fast_options, timeout=120)
    if liar.status == "rejected":
        assert liar.reason.startswith("patched_timer"), liar.reason
        return
    assert liar.status == "pass", liar.reason
    twin = PAUSE.replace("\nchannel.send = send\n", "\n")
    assert "channel.send = send" not in twin
    honest = module_worker.verify(SMALL, twin, replaced=None, options=fast_options, timeout=120)
    assert honest.status == "pass", honest.reason
    assert liar.timings["ours"] > 0.5 * honest.timings["ours"], (liar.timings, honest.timings)


AHEAD = (ADV / "candidates" / "precompute_in_randn.py").read_text()


def test_work_hidden_in_the_draw_is_not_outside_the_clock(module_worker, fast_options):
    """On the CPU the judge draws a timed call's inputs and hands them over: a replaced
    torch.randn that computes the answer while drawing never runs for a timed call, so the
    forward does the work under the timer (4M elements: well over a millisecond on any CPU;
    a precomputed hit returns in tens of microseconds)."""
    v = module_worker.verify(BIG, AHEAD, replaced=None, options=fast_options, timeout=120)
    assert v.status == "pass", v.reason
    assert v.timings["ours_wall"] > 1.0, v.timings


def test_the_verdicts_time_is_judged_call_by_call():
    from stitchcuda_lab.verifier.verify import judged_ms
    path, allowance = 5.0, 3.0
    sizes = [1, 2, 4, 8, 16, 32, 64]           # calls of different lengths: 1 ms a unit
    honest = [(t, path + 0.5) for t in sizes]   # the judge's clock: the call plus the path
    assert judged_ms(honest, path, allowance) == 8
    # every call reports the quickest time so far: true on the quickest calls only
    least = [(1.0, path + 0.5 + t - 1.0) for t in sizes]
    assert judged_ms(least, path, allowance) == 8 - allowance + 0.5
    # a tenth of every call, and one call that returned at once (its output unchecked)
    lying = [(t / 10, path + t * 0.9) for t in [16] * 6] + [(0.01, path)]
    assert judged_ms(lying, path, allowance) == 16 - allowance
    # load on the host in a few calls moves nothing
    loaded = honest[:4] + [(t, path + 40.0) for t in sizes[4:6]] + honest[6:]
    assert judged_ms(loaded, path, allowance) == 8


RAGGED = (ADV / "problems" / "ragged_linear.py").read_text()
LEAST = (ADV / "candidates" / "timer_reports_least_so_far.py").read_text()
HONEST = LEAST.replace("timing.Timer.call = call", "")   # the same, its timer left alone


def test_a_timer_reporting_the_quickest_call_for_every_call_gets_no_faster_time(module_worker):
    """Calls of 16 to 2047 rows of a 1024 x 1024 GEMM (milliseconds to tens of them): a timer
    that reports the least time so far on every call used to get the time of a small call
    (about a fifth of the median). Its time now is the median of what the judge's clock saw,
    within the path's allowance: near an honest timer's, measured just before."""
    from stitchcuda_lab.verifier.options import VerifyOptions
    opts = VerifyOptions(trials=5, timing_trials=9, warmup=1, compile_modes="", profile=False)
    honest = module_worker.verify(RAGGED, HONEST, replaced=None, options=opts, timeout=180)
    liar = module_worker.verify(RAGGED, LEAST, replaced=None, options=opts, timeout=180)
    assert honest.status == "pass", honest.reason
    if liar.status == "rejected":
        assert liar.reason.startswith("patched_timer"), liar.reason
        return
    assert liar.status == "pass", liar.reason
    assert liar.timings["ours"] > 0.35 * honest.timings["ours"], (liar.timings, honest.timings)


# a kilobyte of outputs from 16 bytes of inputs
WIDE_OUT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum() + torch.zeros(256)


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
"""


def test_the_path_is_calibrated_in_rounds_no_longer_than_the_timed_calls(tmp_path, monkeypatch):
    """The calibration's rounds hold as many calls' outputs as the timed rounds do (at most
    ROUND_BYTES between two checks): sized by the reference's outputs, which no trial of the job
    has measured yet, and not by its inputs alone (a problem of small inputs and GBs of outputs
    kept every calibration call's outputs at once)."""
    from stitchcuda_lab.verifier import verify
    from stitchcuda_lab.verifier.options import VerifyOptions
    monkeypatch.setitem(verify.ROUND_BYTES, "cpu", 4096)   # four calls' outputs
    opts = VerifyOptions(trials=1, timing_trials=20, warmup=1, compile_modes="", profile=False)
    job = verify.Job({"options": opts.to_dict(), "problem_source": WIDE_OUT},
                     verify.WorkerState("cpu", tmp_path), time.monotonic() + 60)
    job.baselines([])   # as run() does before it calibrates
    calls: list[int] = []
    rounds: list[int] = []

    kept: set[bool] = set()

    def remote_call(seed, keep=True):
        calls.append(seed)
        kept.add(keep)
        return 1.0, 1.0, 3.0

    def end_round(picked):
        rounds.append(len(calls))
        calls.clear()
        return {}
    monkeypatch.setattr(job, "remote_call", remote_call)
    monkeypatch.setattr(job, "end_round", end_round)
    calibration = job.calibrate()
    assert calibration.least == 2.0 and calibration.median == 2.0
    assert max(rounds) <= 4 and sum(rounds) >= 4, rounds
    assert kept == {False}   # never checked, so never copied out of the arena (CUDA)


def _clock_job(tmp_path, monkeypatch, excess_per_round: list[float], left_s: float = 600,
               timed_again: tuple = ()):
    """A CPU job whose timed calls show the judge's clock ``excess_per_round[i]`` ms per call
    past the timer's report in round i (0: the timed calls, then each confirming round), and
    the waits it slept between rounds."""
    from stitchcuda_lab.verifier import verify
    from stitchcuda_lab.verifier.options import VerifyOptions
    opts = VerifyOptions(trials=1, timing_trials=5, warmup=1, compile_modes="", profile=False)
    job = verify.Job({"options": opts.to_dict(), "problem_source": WIDE_OUT},
                     verify.WorkerState("cpu", tmp_path), time.monotonic() + left_s)
    rounds = iter(excess_per_round)
    timings = [next(rounds), *timed_again]

    def timed(call, check):   # the timed calls, then (timed_again) the calls timed again
        e = timings.pop(0)
        return {"ms": 1.0, "least_extra_ms": 2.0 + e, "least_seen_ms": 3.0 + e,
                "wall_ms": 1.0, "calls": [(1.0, 2.0 + e)] * 5}
    monkeypatch.setattr(job, "timed", timed)
    monkeypatch.setattr(job, "least_disagreement", lambda: 2.0 + next(rounds))
    slept: list[float] = []
    monkeypatch.setattr(verify.time, "sleep", slept.append)
    return job, slept


def test_a_disagreement_that_passes_within_the_waits_is_no_patched_timer(tmp_path, monkeypatch):
    """Load on the host that outlasts the rounds run back to back (seen on an H100 host with
    eight problems side by side: an honest GEMM 1 ms over its timer on three rounds) is
    waited out: a round after the waits agrees, and the candidate is timed, not rejected."""
    from stitchcuda_lab.verifier import verify
    job, slept = _clock_job(tmp_path, monkeypatch, [9.0, 9.0, 9.0, 0.0], timed_again=(9.0,))
    timings = job.time_candidate({}, verify.Calibration(median=2.0, least=2.0))
    assert slept == [0.0, 0.0, verify.CLOCK_RETRY_WAITS_S[0]]
    # let through, it is timed by the judge's clock on its calls (11 ms over a 2 ms path,
    # less the path's allowance), not by its timer's 1 ms
    assert timings["ours"] > 5.0, timings


def test_calls_timed_under_the_load_that_passed_are_timed_again(tmp_path, monkeypatch):
    """The load that lengthened the disagreement lengthened the timed calls too: once a later
    round agrees, the calls are timed again and theirs is the verdict's count (here the
    timer's 1 ms, which the judge's clock now agrees with, not the loaded round's 7-10 ms)."""
    from stitchcuda_lab.verifier import verify
    job, slept = _clock_job(tmp_path, monkeypatch, [9.0, 9.0, 9.0, 0.0], timed_again=(0.0,))
    timings = job.time_candidate({}, verify.Calibration(median=2.0, least=2.0))
    assert timings["ours"] == pytest.approx(1.0), timings


def test_a_timer_that_lies_in_every_round_is_rejected_after_the_waits(tmp_path, monkeypatch):
    from stitchcuda_lab.verifier import verify
    n = 1 + verify.CLOCK_CONFIRM_ROUNDS + len(verify.CLOCK_RETRY_WAITS_S)
    job, slept = _clock_job(tmp_path, monkeypatch, [9.0] * n)
    with pytest.raises(verify.Reject) as e:
        job.time_candidate({}, verify.Calibration(median=2.0, least=2.0))
    assert e.value.name == "patched_timer" and f"quietest of {n} rounds" in e.value.detail
    assert slept == [0.0] * verify.CLOCK_CONFIRM_ROUNDS + list(verify.CLOCK_RETRY_WAITS_S)


def test_no_wait_for_load_to_pass_once_the_job_is_near_its_deadline(tmp_path, monkeypatch):
    """With 15 s left the waits and their rounds would end the job as a timeout: the
    disagreement is the verdict after the rounds back to back, as it was before the waits."""
    from stitchcuda_lab.verifier import verify
    job, slept = _clock_job(tmp_path, monkeypatch, [9.0] * 8, left_s=15)
    with pytest.raises(verify.Reject) as e:
        job.time_candidate({}, verify.Calibration(median=2.0, least=2.0))
    assert slept == [0.0] * verify.CLOCK_CONFIRM_ROUNDS
    assert f"quietest of {1 + verify.CLOCK_CONFIRM_ROUNDS} rounds" in e.value.detail


def test_the_rounds_left_come_from_the_trial_floor_on_the_cpu_whatever_the_claim(tmp_path):
    """The checks are spread over the rounds the judge expects (check_timed): on the CPU the
    timing ends at the trial floor, so a candidate claiming 0.001 ms a call expects no more
    rounds than an honest one (it made 5000 of them: one check a round). On CUDA the time
    budget counts in reported times, capped at MAX_TRIALS calls."""
    from stitchcuda_lab.verifier import verify
    from stitchcuda_lab.verifier.options import VerifyOptions
    opts = VerifyOptions(trials=1, timing_trials=20, warmup=1, compile_modes="", profile=False)
    job = verify.Job({"options": opts.to_dict(), "problem_source": WIDE_OUT},
                     verify.WorkerState("cpu", tmp_path), time.monotonic() + 60)
    assert job.calls_left([0.001] * 17) == 3
    assert job.calls_left([0.001] * 25) == 0
    job.device = "cuda"
    assert job.calls_left([0.001] * 17) == verify.MAX_TRIALS - 17
    assert job.calls_left([1000.0] * 17) == 3


def test_the_quietest_call_outweighs_the_timer_only_past_the_paths_spread():
    from stitchcuda_lab.verifier.verify import Calibration, quietest_ms
    steady = Calibration(median=12.2, least=12.0)
    # an honest 0.3 ms kernel whose quietest call came 0.3 ms over the path: its own time
    assert quietest_ms(0.3, 12.0 + 0.6, steady, "cpu") == 0.3
    # a timer that claims 0.04 ms of a 2 ms forward: the judge's clock
    assert quietest_ms(0.04, 12.0 + 2.0, steady, "cpu") == pytest.approx(2.0)
    # on a path that spreads 3 ms, 2 ms over it is within the spread (judged_ms bounds it)
    assert quietest_ms(0.04, 12.0 + 2.0, Calibration(15.0, 12.0), "cpu") == 0.04
    # CUDA's slack is tens of microseconds: 0.1 ms over a steady path is seen
    assert quietest_ms(0.5, 0.7 + 0.6, Calibration(0.705, 0.7), "cuda") == pytest.approx(0.6)


def test_a_path_slowed_by_load_while_it_was_timed_hides_no_forward():
    """A calibration taken while the host was busy (median far over the least) grants no more
    spread than twice the path's least: a candidate whose timer reports 0.03 ms while each
    call's path carries its 30 ms forward is timed at most of that forward, though the path's
    median was 40 ms."""
    from stitchcuda_lab.verifier.verify import Calibration, counted_ms
    busy = Calibration(median=40.0, least=3.0)
    calls = [(0.03, 3.0 + 30.0 + j) for j in (0.0, 0.5, 1.0, 0.2, 0.1)]
    res = {"least_seen_ms": 3.0 + 30.0, "calls": calls}
    assert counted_ms(0.03, res, busy, "cpu") >= 25.0
    # an honest candidate on the same calibration: its clock shows the path alone
    honest = {"least_seen_ms": 12.0 + 3.2, "calls": [(12.0, 3.0 + j) for j in (0.2, 0.4, 1.0)]}
    assert counted_ms(12.0, honest, busy, "cpu") == 12.0


def test_a_calibration_timed_in_a_busy_moment_subtracts_no_more_than_an_earlier_quiet_one():
    """The path of a problem timed at 2 ms by an earlier job and at 6 ms by this one (the host
    busy while it calibrated): a candidate that does 4 ms of its work in the path while its
    timer reports 0.5 ms is counted at about that work, not at what its timer says; with no
    earlier job it would be counted at its timer."""
    from stitchcuda_lab.verifier.verify import Calibration, counted_ms
    calls = [(0.5, 2.0 + 4.0 + j) for j in (0.0, 0.1, 0.3, 0.2, 0.4)]
    res = {"least_seen_ms": 0.5 + 6.0, "calls": calls}
    busy = Calibration(median=6.2, least=6.0)
    assert counted_ms(0.5, res, busy, "cpu") == 0.5
    remembered = Calibration(median=6.2, least=6.0, floor=2.0)
    assert remembered.path == 2.0
    assert counted_ms(0.5, res, remembered, "cpu") >= 4.0
    # a floor above this job's least is not a floor
    assert Calibration(median=6.2, least=6.0, floor=9.0).path == 6.0


def test_the_profiled_calls_keep_only_the_call_picked_before_them(tmp_path, monkeypatch):
    """The candidate's profiled calls (CUDA): one of them is checked, picked before they run;
    only its outputs are copied out of the arena (the others' places are held, so indices
    stay aligned), and the check comes after all of them, so the sandbox learns nothing of
    which one until every profiled call is made."""
    from stitchcuda_lab.verifier import verify
    from stitchcuda_lab.verifier.options import VerifyOptions
    opts = VerifyOptions(trials=1, timing_trials=3, warmup=1, compile_modes="", profile=False)
    job = verify.Job({"options": opts.to_dict(), "problem_source": WIDE_OUT},
                     verify.WorkerState("cpu", tmp_path), time.monotonic() + 60)
    events: list = []
    job.last_reply = {}
    monkeypatch.setattr(job, "remote_call",
                        lambda seed, trace=False, keep=True: events.append(("call", keep)))
    monkeypatch.setattr(job, "read_trace", lambda path: {})
    monkeypatch.setattr(job, "check_timed",
                        lambda seeds, left, pick=None: events.append(("check", len(seeds), pick)))
    seen = set()
    for _ in range(40):
        events.clear()
        assert len(job.candidate_timed_traces(5)) == 5
        kept = [i for i, e in enumerate(events[:5]) if e == ("call", True)]
        assert len(kept) == 1 and events[5] == ("check", 5, kept) and len(events) == 6
        seen.add(kept[0])
    assert seen == set(range(5))   # any of them


def test_a_check_picked_up_front_checks_that_call(tmp_path, monkeypatch):
    from stitchcuda_lab.verifier import verify
    from stitchcuda_lab.verifier.options import VerifyOptions
    opts = VerifyOptions(trials=1, timing_trials=3, warmup=1, compile_modes="", profile=False)
    job = verify.Job({"options": opts.to_dict(), "problem_source": WIDE_OUT},
                     verify.WorkerState("cpu", tmp_path), time.monotonic() + 60)
    asked: list = []

    def end_round(calls):
        asked.append(calls)
        job.round_inputs = {}
        return {}
    monkeypatch.setattr(job, "end_round", end_round)
    job.checks_left = 1
    with pytest.raises(verify.Reject):   # nothing came back for it: the judge says so
        job.check_timed([11, 12, 13, 14], 0, pick=[2])
    assert asked == [[2]] and job.checks_left == 0


def test_a_call_not_kept_holds_its_place_in_the_round(tmp_path):
    """A call whose copies the judge does not take still counts in the round: a later call
    picked by index is that call, not the one after it."""
    from stitchcuda_lab.verifier import verify
    job = verify.Job.__new__(verify.Job)
    job.pinned, job.pinned_inputs = [], []
    job.take(None, keep=False)
    job.take(None)   # a reply without its entries: a protocol failure, kept as such
    assert len(job.pinned) == len(job.pinned_inputs) == 2
    assert "did not keep" in job.pinned[0][0].error and "without" in job.pinned[1][0].error


def test_the_sandbox_is_not_told_which_calls_the_judge_checks_from_the_arena(tmp_path):
    """CUDA with the arena: the judge took its own copies of every call it may check, so the
    round's end asks the sandbox for none (it once said which, and a candidate could count
    the checks left); without the arena the sandbox must write the picked ones."""
    from stitchcuda_lab.verifier import verify
    job = verify.Job.__new__(verify.Job)
    job.device, job.pinned, job.pinned_inputs = "cuda", [[], [], []], [[], [], []]
    sent: list = []
    job.ask = lambda msg, stops=None: sent.append(msg) or {"picked": {}, "inputs": {}}
    job.arena_mapped = True
    assert set(job.end_round([1])) == {"1"} and sent[-1]["calls"] == []
    job.arena_mapped, job.pinned = False, []
    job.end_round([1])
    assert sent[-1]["calls"] == [1]


def test_the_last_round_checks_a_call_even_with_the_checks_spent(tmp_path, monkeypatch):
    """CHECKED_CALLS are spread over the rounds; where they ran out before the calls ended
    (the sampler asking for more calls), the rounds after them checked nothing, and a
    candidate counting the checks knew it. The last round checks one in any case."""
    from stitchcuda_lab.verifier import verify
    job = verify.Job.__new__(verify.Job)
    job.wide, job.checks_left = {}, 0
    asked: list = []

    def end_round(calls):
        asked.append(calls)
        raise RuntimeError("stop")   # the picking is what is tested
    job.end_round = end_round
    for left, want in ((3, 0), (1, 1), (0, 1)):
        with pytest.raises(RuntimeError):
            job.check_timed([1, 2, 3, 4], left)
        assert len(asked[-1]) == want and job.checks_left == 0


def test_on_the_cpu_the_judge_flushes_the_cache_before_each_timed_call(tmp_path, monkeypatch):
    """From its own process, between the sandbox's getting ready and the call: a flush in the
    candidate's process was the candidate's to skip (candidates/flush_skipped_weights_warm.py),
    and its data stayed warm where eager's, flushed by the judge, did not."""
    from types import SimpleNamespace

    from stitchcuda_lab.verifier import verify
    from stitchcuda_lab.verifier.options import VerifyOptions
    opts = VerifyOptions(trials=1, timing_trials=3, warmup=1, compile_modes="", profile=False,
                         cpu_flush_mb=1)
    job = verify.Job({"options": opts.to_dict(), "problem_source": WIDE_OUT},
                     verify.WorkerState("cpu", tmp_path), time.monotonic() + 60)
    for name in ("staging", "inputs"):
        (tmp_path / name).mkdir()
    job.box = SimpleNamespace(staging=tmp_path / "staging", inputs=tmp_path / "inputs")
    job.peek = False
    asked: list[str] = []
    flushed: list[int] = []
    timer = job.state.timer(1)
    monkeypatch.setattr(timer, "flush", lambda: flushed.append(len(asked)))

    def ask(cmd, *args, **kwargs):
        asked.append(cmd["op"])
        return {"ms": 1.0, "wall_ms": 1.0, "outputs": []} if cmd["op"] == "call" else {}
    monkeypatch.setattr(job, "ask", ask)
    monkeypatch.setattr(job, "pin", lambda entries: None)
    for seed in (1, 2, 3):
        job.remote_call(seed)
    assert asked == ["prepare", "call"] * 3 and flushed == [1, 3, 5]
