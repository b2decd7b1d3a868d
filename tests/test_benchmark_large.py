"""The large problems keep the KernelBench contract and are as large as they say: built on the
meta device (nothing allocated), each forward reads and writes hundreds of MB at least, most of
them GBs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitchcuda_lab.problem import problem_from_source
from stitchcuda_lab.roofline import least_work

LARGE = Path(__file__).resolve().parent.parent / "benchmarks" / "large"
FILES = sorted(LARGE.glob("level*/*.py"))


def test_there_are_large_problems_of_each_kind():
    kinds = {f.read_text().split(":", 1)[0].strip('"') for f in FILES}
    assert len(FILES) >= 20
    gigabytes = [f for f in FILES if least_work(problem_from_source(f.read_text()))["bytes"]
                 >= 10**9]
    assert len(gigabytes) >= 14
    assert {"pointwise", "norm", "scan", "loss", "conv", "gemm", "model"} <= kinds


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_large_problem_moves_hundreds_of_megabytes(path):
    problem = problem_from_source(path.read_text(), name=path.stem, origin=str(path))
    work = least_work(problem)
    assert "work_error" not in work, work
    least = 10**7 if path.stem == "mobilenet" else 2**28   # a whole model at batch 10
    assert work["bytes"] >= least, (path.name, work["bytes"])
