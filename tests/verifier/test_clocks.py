"""The judge's clock bounds the time a candidate reports: a lying timer claims nothing faster.

A candidate that forges its timing replies (every timed call claims 2% of what it took, on the
way out through channel.send, where no watch list looks) is either rejected as
``patched_timer`` or timed at what the judge's own clock saw, never at its claim.
"""

from __future__ import annotations

from pathlib import Path

ADV = Path(__file__).parent.parent / "adversarial"
BIG = (ADV / "problems" / "pointwise_big.py").read_text()
# the adversarial candidate that rewrites its replies (every timed call claims 2% of its
# time), here on a problem whose forward takes milliseconds, well past the clock's slack
LIAR = (ADV / "candidates" / "channel_send_rewrite.py").read_text()


def test_a_timer_that_claims_two_percent_gets_no_faster_time(cpu_worker, fast_options):
    liar = cpu_worker.verify(BIG, LIAR, replaced=None, options=fast_options, timeout=120)
    if liar.status == "rejected":
        assert liar.reason.startswith("patched_timer"), liar.reason
        return
    assert liar.status == "pass", liar.reason
    # ours_wall is the median of what it claimed; ours is what the judge's clock saw: about
    # fifty times more (compared within one verdict, so load on the host cancels out)
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
