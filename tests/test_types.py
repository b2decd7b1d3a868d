"""The package type-checks: mypy at the configuration in pyproject.toml ([tool.mypy]) finds
nothing, so the seams (agents/base.py's Planner and Coder, verifier/worker.py's WorkerHandle)
are checked against their callers on every test run."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "stitchcuda_lab"


def _mypy(*args: str) -> tuple[str, str, int]:
    api = pytest.importorskip("mypy.api", reason="mypy is not installed: pip install -e '.[dev]'")
    # the cache (git-ignored) makes a second run take seconds; the first reads all of torch
    return api.run(["--config-file", str(ROOT / "pyproject.toml"),
                    "--cache-dir", str(ROOT / ".mypy_cache"), *args])


def test_the_package_type_checks():
    out, err, status = _mypy(str(PKG))
    assert status == 0, f"mypy found problems (run `python -m mypy`):\n{out}{err}"


def test_the_type_check_can_fail(tmp_path):
    probe = tmp_path / "probe.py"          # outside the package: the check itself is tested
    probe.write_text("from stitchcuda_lab.agents.base import Coder\n"
                     "class NotACoder:\n    name = 'x'\n"
                     "def use(c: Coder) -> None: ...\n"
                     "use(NotACoder())\n"
                     "def n(x: int = None) -> int:\n    return x\n")
    out, _, status = _mypy(str(PKG), str(probe))     # the package beside it: its imports resolve
    assert status == 1, out
    assert 'probe.py:5: error: Argument 1 to "use" has incompatible type "NotACoder"' in out
    assert 'probe.py:6: error: Incompatible default for parameter "x" (default has type "None"' \
        in out                                       # no implicit Optional


def test_a_verdicts_reason_name_is_its_named_cause_or_nothing():
    from stitchcuda_lab.verdict import Verdict
    assert Verdict("runtime_error", "out_of_memory: CUDA out of memory").reason_name == \
        "out_of_memory"
    assert Verdict("rejected", "patched_timer").reason_name == "patched_timer"
    assert Verdict("incorrect", "no candidate passed: 3 of 4").reason_name == ""
    assert Verdict("pass").reason_name == ""


def test_a_verdict_shows_a_person_its_times_not_the_verifiers_phases():
    from stitchcuda_lab.verdict import Verdict
    v = Verdict(status="pass", timings={
        "ours": 0.2, "eager": 0.3, "compile:default": 0.25, "build": 850.0,
        "ours_wall": 0.21, "eager_wall": 0.31, "phase:calibrate": 40.0, "phase:judge": 3.0})
    assert v.shown_timings() == [("eager", 0.3), ("torch.compile (default)", 0.25),
                                 ("ours (candidate)", 0.2), ("build (kernels)", 850.0)]
    shown = v._repr_html_()
    assert "phase:" not in shown and "_wall" not in shown and "torch.compile (default)" in shown
    assert v.to_dict()["timings"]["phase:calibrate"] == 40.0   # kept for the JSON
