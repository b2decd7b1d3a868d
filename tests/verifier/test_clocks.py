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
    # the same kernel: its time is what the judge saw, within load noise, not a tenth of it
    assert liar.timings["ours"] > 0.5 * honest.timings["ours"], (liar.timings, honest.timings)
