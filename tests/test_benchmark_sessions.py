"""benchmarks/sessions.py: every try of a session, its verdict and where the time went."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stitchcuda_lab.problem import problem_from_source
from stitchcuda_lab.session import Session

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from test_session import PROBLEM, FakeCoder, FakePlanner, FakeWorker  # noqa: E402


@pytest.fixture
def sessions_module():
    sys.path.insert(0, str(HERE.parent / "benchmarks"))
    try:
        import sessions
        yield sessions
    finally:
        sys.path.remove(str(HERE.parent / "benchmarks"))


class PhasedWorker(FakeWorker):
    """Verdicts with the Verifier's phases in their timings, as the real one gives."""

    def verify(self, *a, **kw):
        v = super().verify(*a, **kw)
        v.timings.update({"phase:trials": 1500.0, "phase:trials.candidate": 900.0,
                          "phase:trials.sandbox.second": 600.0, "build": 40.0})
        return v


def test_each_try_is_listed_with_its_verdict_label_and_phases(settings, sessions_module,
                                                             capsys):
    from stitchcuda_lab.graph import analyse
    problem = problem_from_source(PROBLEM)
    graph = analyse(problem, device="cpu", profile=False)
    s = Session.create(problem, settings.replace(iters=1), device="cpu", planner=FakePlanner(),
                       coder=FakeCoder({0: [1.4], 1: [1.9, None]}), worker=PhasedWorker(),
                       graph=graph)
    s.advance(auto=True)
    root = Path(settings.sessions_dir)
    assert sessions_module.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"== {problem.name} (")
    assert out.count(" propose ") == 3 and out.count(" verdict ") == 3
    assert ": pass, ours 0.714 ms, eager 1.000" in out       # the 1.4x try
    assert ": incorrect (max abs err" in out                  # the wrong one, and why
    assert out.count("ms: trials 1500, trials.candidate 900, build 40, "
                     "trials.sandbox.second 600") == 3
    assert "finished" in out
    assert sessions_module.main([str(root / "nowhere")]) == 2
    # a run's own sessions: none written after a file made now
    (root.parent / "started").touch()
    capsys.readouterr()
    assert sessions_module.main([str(root), "--newer", str(root.parent / "started")]) == 0
    assert capsys.readouterr().out == ""
