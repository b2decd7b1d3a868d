"""Export: standalone KernelBench-style files for the best candidate, and trajectories JSONL."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from stitchcuda_lab.errors import UsageError
from stitchcuda_lab.export import reward_tier, trajectory_records, write_candidate
from stitchcuda_lab.candidate import Candidate, KernelSource
from stitchcuda_lab.verdict import Verdict
from stitchcuda_lab.problem import problem_from_source
from stitchcuda_lab.session import Session

sys.path.insert(0, str(Path(__file__).parent))
from test_session import PROBLEM, PROGRAM, FakeCoder, FakePlanner, FakeWorker


@pytest.fixture(scope="module")
def graph():
    from stitchcuda_lab.graph import analyse
    return analyse(problem_from_source(PROBLEM), device="cpu", profile=False)


def session(settings, graph, speeds, iters=1):
    s = Session.create(problem_from_source(PROBLEM), settings.replace(iters=iters),
                       device="cpu", planner=FakePlanner(), coder=FakeCoder(speeds, record=True),
                       worker=FakeWorker(), graph=graph)
    s.advance(auto=True)
    return s


def test_exported_model_new_is_standalone_and_matches_the_reference(settings, graph, tmp_path):
    s = session(settings, graph, {0: [1.4], 1: [1.9]})
    out = s.export(tmp_path / "out")
    ns = problem_from_source((out / "model_new.py").read_text(), name="model_new").namespace()
    ref = problem_from_source((out / "problem.py").read_text())
    torch.manual_seed(42)
    new = ns["ModelNew"](*ref.namespace()["get_init_inputs"]())
    x = ref.make_inputs(seed=5)
    assert torch.allclose(new(*x), ref.make_model(seed=42)(*x))
    assert "SOURCES" in ns and "k1_0" in ns["SOURCES"]      # the kernels travel in the file


def test_export_writes_kernel_sources_readme_and_verdict(settings, graph, tmp_path):
    s = session(settings, graph, {0: [1.4], 1: [1.9]})
    out = s.export(tmp_path / "out")
    cand, _ = s.best()
    assert (out / "kernels" / "k1_0.c").read_text().strip() == cand.kernels[0].code
    readme = (out / "README.md").read_text()
    assert cand.id in readme and "1.90x vs eager" in readme and "| eager | 1.0000 |" in readme
    assert json.loads((out / "verdict.json").read_text())["speedup_vs_eager"] == 1.9
    assert (out / "model_new.py").read_text().startswith("# ModelNew for cell")


def test_cuda_kernels_get_a_cu_extension(tmp_path):
    cand = Candidate(program="class ModelNew: pass\n",
                     kernels=[KernelSource(name="fused_0", lang="cuda",
                                           code='extern "C" __global__ void f() {}'),
                              KernelSource(name="row_1", lang="c", code="void g(void) {}")])
    write_candidate(cand, None, tmp_path)
    assert (tmp_path / "kernels" / "fused_0.cu").exists()
    assert (tmp_path / "kernels" / "row_1.c").exists()
    assert "Not verified." in (tmp_path / "README.md").read_text()


def test_nothing_to_export_without_a_passing_candidate(settings, graph, tmp_path):
    s = session(settings, graph, {0: [None]}, iters=0)
    with pytest.raises(UsageError, match="no candidate that passed"):
        s.export(tmp_path / "out")
    out = s.export(tmp_path / "out", trajectories=True)
    assert not (out / "model_new.py").exists()
    rows = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert rows and all(r["reward"] == -1 for r in rows)


def test_trajectories_pair_each_exchange_with_the_verdict_it_led_to(settings, graph, tmp_path):
    s = session(settings, graph, {0: [None, 1.02], 1: [1.5]})
    rows = trajectory_records(s)
    assert [r["role"] for r in rows] == ["planner", "coder", "coder"]
    for r in rows:
        assert set(r) >= {"task", "prompt", "reply", "verdict", "reward"}
    planner, coder0, coder1 = rows
    assert coder0["prompt"] == {"user": "write iteration 0"} and len(coder0["candidates"]) == 2
    assert coder0["verdict"]["speedup_vs_eager"] == 1.02 and coder0["reward"] == 1
    assert coder1["verdict"]["speedup_vs_eager"] == 1.5 and coder1["reward"] == 2
    assert planner["verdict"]["speedup_vs_eager"] == 1.5     # a plan is judged by the outcome
    s.export(tmp_path / "t", trajectories=True)
    lines = (tmp_path / "t" / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(x)["role"] for x in lines] == ["planner", "coder", "coder"]


def test_a_session_without_llm_exchanges_exports_an_empty_trajectory_file(settings, graph,
                                                                           tmp_path):
    class QuietPlanner:                   # no recorder seam, like the offline agents
        name = "quiet"

        def plan(self, *a, **k):
            return FakePlanner().plan(*a, **k)

    s = Session.create(problem_from_source(PROBLEM), settings.replace(iters=0), device="cpu",
                       planner=QuietPlanner(), coder=FakeCoder({0: [1.3]}), worker=FakeWorker(),
                       graph=graph)
    s.advance(auto=True)
    out = s.export(tmp_path / "o", trajectories=True)
    assert (out / "trajectories.jsonl").read_text() == ""
    assert (out / "model_new.py").exists()


@pytest.mark.parametrize("verdict,tier", [
    (None, -1),
    (Verdict(status="rejected", correct=True, speedup_vs_eager=3.0), -1),
    (Verdict(status="incorrect"), -1),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.03), 1),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.2, speedup_vs_compile=0.9), 2),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.2, speedup_vs_compile=1.1), 3),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.2, reward=1), 1),
])
def test_reward_tiers(verdict, tier):
    assert reward_tier(verdict) == tier


def test_program_template_is_a_valid_candidate():
    # guards the fixtures above: the fake coder's program really defines ModelNew
    ns = problem_from_source(PROGRAM.format(speed=1.0, wrong="")).namespace()
    assert "ModelNew" in ns
