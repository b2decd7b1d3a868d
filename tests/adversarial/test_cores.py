"""A candidate runs on the cores the judge has, as the baselines do: wider_cpu_affinity.py
widens its CPU affinity to every core of the host and raises torch's threads to match. On a
judge pinned to one core (as a bench pins each problem to a slice of the host) it used to run
its GEMM on two and time twice as fast as the same GEMM on the one core it was given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stitchcuda_lab.verifier.options import VerifyOptions
from stitchcuda_lab.verifier.worker import Worker

HERE = Path(__file__).parent
WIDER = (HERE / "candidates" / "wider_cpu_affinity.py").read_text()
# the same GEMM, on the cores it is given
HONEST = WIDER.replace("os.sched_setaffinity(0, ALL)", "pass").replace(
    "torch.set_num_threads(len(ALL))", "pass")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin to one")
def test_a_candidate_widening_its_cpu_affinity_gets_no_more_cores_than_the_baselines(tmp_path):
    problem = (HERE / "problems" / "linear_big.py").read_text()
    opts = VerifyOptions(trials=5, timing_trials=5, warmup=1, compile_modes="", profile=False)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})   # the worker, its judge and sandboxes: one core
    try:
        with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
            honest = w.verify(problem, HONEST, replaced=None, options=opts, timeout=180)
            wider = w.verify(problem, WIDER, replaced=None, options=opts, timeout=180)
    finally:
        os.sched_setaffinity(0, mine)
    assert honest.status == wider.status == "pass", (honest.reason, wider.reason)
    # two cores would have been about half the time; the other test process's load moves
    # one core's times by a quarter (seen: 40 ms against 54 on a loaded 2-core machine)
    assert wider.timings["ours"] > 0.6 * honest.timings["ours"], (wider.timings, honest.timings)
