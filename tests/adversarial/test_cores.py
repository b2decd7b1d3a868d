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
# the same candidate, made to give a wrong answer wherever it got more cores than it was given,
# from its forward's thread or from a thread of its own: the verdict says whether it did,
# with no clock to read (two cores against one was once a 2x time, and a loaded host moves
# one core's times by a quarter or more)
CHECKED = WIDER.replace("import os\n", "import os\nimport threading\n", 1).replace(
    "        return torch.addmm(self.fc.bias, x, self.fc.weight.t())",
    """        got = []

        def widen():
            try:
                os.sched_setaffinity(0, ALL)
            except OSError:
                pass
            got.append(len(os.sched_getaffinity(0)))

        t = threading.Thread(target=widen)
        t.start()
        t.join()
        if max(got + [len(os.sched_getaffinity(0))]) > 1:
            return torch.zeros(x.shape[0], 1024)     # wrong: it got more cores
        return torch.addmm(self.fc.bias, x, self.fc.weight.t())""")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin to one")
def test_a_candidate_cannot_widen_its_cpu_affinity_past_the_judges_cores(tmp_path):
    assert CHECKED != WIDER and "it got more cores" in CHECKED
    problem = (HERE / "problems" / "linear_big.py").read_text()
    opts = VerifyOptions(trials=3, timing_trials=3, warmup=1, compile_modes="", profile=False)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})   # the worker, its judge and sandboxes: one core
    try:
        with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
            verdict = w.verify(problem, CHECKED, replaced=None, options=opts, timeout=180)
    finally:
        os.sched_setaffinity(0, mine)
    assert verdict.status == "pass", verdict.reason
