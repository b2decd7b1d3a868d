"""The judge's clock bounds the time a candidate reports: a lying timer claims nothing faster.

A candidate that forges its timing replies (here: every timed call claims a tenth of what it
took, on the way out through channel.send, where no watch list looks) is either rejected as
``patched_timer`` or timed at what the judge's own clock saw, never at its claim.
"""

from __future__ import annotations

from pathlib import Path

ADV = Path(__file__).parent.parent / "adversarial"
BIG = (ADV / "problems" / "pointwise_big.py").read_text()
HONEST = (ADV / "candidates" / "pass_big_control.py").read_text()
LIAR = HONEST + '''

from stitchcuda_lab.verifier import channel as _channel

_send = _channel.send


def _claim_a_tenth(fd, obj):
    if isinstance(obj, dict) and "ms" in obj and "wall_ms" in obj:
        obj = dict(obj, ms=obj["ms"] * 0.1, wall_ms=obj["wall_ms"] * 0.1)
    _send(fd, obj)


_channel.send = _claim_a_tenth
'''


def test_a_timer_that_claims_a_tenth_gets_no_faster_time(cpu_worker, fast_options):
    honest = cpu_worker.verify(BIG, HONEST, replaced=None, options=fast_options, timeout=120)
    liar = cpu_worker.verify(BIG, LIAR, replaced=None, options=fast_options, timeout=120)
    assert honest.status == "pass", honest.reason
    if liar.status == "rejected":
        assert liar.reason.startswith("patched_timer"), liar.reason
        return
    assert liar.status == "pass", liar.reason
    # ours_wall is the median of what it claimed; ours is what the judge's clock saw: about
    # ten times more (compared within one verdict, so load on the host cancels out)
    assert liar.timings["ours"] > 3 * liar.timings["ours_wall"], liar.timings


AHEAD = (ADV / "candidates" / "precompute_in_randn.py").read_text()


def test_work_hidden_in_the_draw_is_not_outside_the_clock(cpu_worker, fast_options):
    """On the CPU the judge draws a timed call's inputs and hands them over: a replaced
    torch.randn that computes the answer while drawing never runs for a timed call, so the
    forward does the work under the timer (4M elements: well over a millisecond on any CPU;
    a precomputed hit returns in tens of microseconds)."""
    v = cpu_worker.verify(BIG, AHEAD, replaced=None, options=fast_options, timeout=120)
    assert v.status == "pass", v.reason
    assert v.timings["ours_wall"] > 1.0, v.timings
