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


def test_a_candidate_slower_than_eager_is_exported_saying_the_reference_is_kept(
        settings, graph, tmp_path):
    s = session(settings, graph, {0: [0.7], 1: [0.6]})
    assert s.keeps_reference()
    out = s.export(tmp_path / "out")
    readme = (out / "README.md").read_text()
    assert "not faster than eager" in readme and "The reference is kept" in readme
    assert "Not faster than eager PyTorch" in (out / "model_new.py").read_text()
    with pytest.warns(RuntimeWarning, match="not faster than eager"):
        s.model()


def test_an_export_folder_that_cannot_be_written_is_a_usage_error(settings, graph, tmp_path):
    s = session(settings, graph, {0: [1.4], 1: [1.9]})
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="cannot export to") as e:
        s.export(tmp_path / "file" / "out")        # a folder under a file
    assert "folder you can write to" in e.value.hint
    assert s.best() is not None and s.state.phase == "done"


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


# --- trajectories as training data: each exchange as it was -----------------------------------


def _input(speed: float, tag: str) -> dict:
    """A submit_candidate input for a program the fake worker judges (speed in the source)."""
    return {"kernels": [{"name": "k", "lang": "c", "code": f"/* {tag} */", "entry": ["k"]}],
            "program": PROGRAM.format(speed=speed, wrong=""),
            "replaced": ["aten.mul.Tensor", "aten.relu.default"], "kept": []}


def _exchange(outcome: str, *, data=None, iteration=0, attempt=1, ask="a1", stop="tool_use",
              skill="generation") -> dict:
    errors = {"invalid": "$: missing required property 'program'",
              "truncated": "the reply was cut off at max_tokens",
              "refused": "declined"}.get(outcome)
    return {"role": "coder", "task": "t1", "iteration": iteration, "provider": "claude",
            "model": "claude-sonnet-5-5", "ask": ask, "attempt": attempt, "outcome": outcome,
            "error": {"kind": outcome, "message": errors} if errors else None,
            "errors": [errors] if errors else [], "skill": skill,
            "prompt": {"system": "s", "context": "c", "user": f"iteration {iteration}",
                       "max_tokens": 8192},
            "reply": {"tool": "submit_candidate", "input": data, "text": "", "thinking": "",
                      "stop_reason": stop, "detail": ""},
            "usage": {"input_tokens": 100, "output_tokens": 50}, "cost_usd": 0.00105}


class ScriptedCoder:
    """Records the given exchanges at each iteration and proposes the accepted candidates."""

    name = "claude"
    stops_early = False

    def __init__(self, script):
        self.script, self.recorder = script, None

    def code(self, problem, graph, plan, settings, *, iteration, previous=None, feedback=None):
        from stitchcuda_lab.agents.llm.coder import candidate_from_reply
        out = []
        for e in self.script.get(iteration, []):
            self.recorder(e)
            if e["outcome"] == "accepted":
                out.append(candidate_from_reply(e["reply"]["input"], iteration=iteration))
        return out


def test_a_rejected_reply_keeps_its_own_error_not_the_verdict_of_its_repair(settings, graph):
    good = _input(1.6, "good")
    script = {0: [_exchange("invalid", data={"kernels": []}),
                  _exchange("accepted", data=good, attempt=2)]}
    s = Session.create(problem_from_source(PROBLEM), settings.replace(iters=0), device="cpu",
                       planner=FakePlanner(), coder=ScriptedCoder(script), worker=FakeWorker(),
                       graph=graph)
    s.advance(auto=True)
    rows = [r for r in trajectory_records(s) if r["role"] == "coder"]
    bad, fixed = rows
    assert (bad["outcome"], bad["reward"], bad["verdict"]) == ("invalid", -1, None)
    assert "missing required property" in bad["error"]["message"]
    assert (fixed["outcome"], fixed["verdict"]["status"], fixed["reward"]) == ("accepted", "pass",
                                                                                2)
    assert (bad["attempt"], fixed["attempt"]) == (1, 2) and bad["ask"] == fixed["ask"]
    assert fixed["model"] == "claude-sonnet-5-5" and fixed["usage"]["output_tokens"] == 50
    assert fixed["candidate_id"] == s.best()[0].id and fixed["verdict_of"] == "candidate"


def test_a_truncated_reply_in_a_resumed_session_is_marked_not_labelled_pass(settings, graph):
    cut = _exchange("truncated", stop="max_tokens", iteration=0)
    script = {0: [cut, _exchange("accepted", data=_input(1.3, "a"), attempt=2)],
              1: [_exchange("accepted", data=_input(1.5, "b"), iteration=1, ask="a2",
                            skill="refinement")]}
    coder = ScriptedCoder(script)
    s = Session.create(problem_from_source(PROBLEM), settings.replace(iters=1), device="cpu",
                       planner=FakePlanner(), coder=coder, worker=FakeWorker(), graph=graph)
    s.advance()                      # plan, waiting for approval
    s.log.release()                  # the process died
    again = Session.open(s.dir, settings, planner=FakePlanner(), coder=coder,
                         worker=FakeWorker())
    again.advance(auto=True)
    again.close()
    rows = [r for r in trajectory_records(again) if r["role"] == "coder"]
    assert [r["outcome"] for r in rows] == ["truncated", "accepted", "accepted"]
    assert rows[0]["truncated"] and rows[0]["reward"] is None and rows[0]["verdict"] is None
    assert [r["reward"] for r in rows[1:]] == [2, 2]
    assert [r["skill"] for r in rows] == ["generation", "generation", "refinement"]


def test_records_from_before_outcomes_were_recorded_are_classified(settings, graph):
    s = session(settings, graph, {0: [1.4]}, iters=0)
    old = [{"role": "coder", "task": "t1", "iteration": 0, "attempt": 1,
            "prompt": {"user": "## Your previous candidate abc"},
            "reply": {"input": {"kernels": []}, "stop_reason": "tool_use"},
            "errors": ["$.program: missing"]},
           {"role": "coder", "task": "t1", "iteration": 0, "attempt": 1, "prompt": {"user": "u"},
            "reply": {"input": None, "stop_reason": "max_tokens"}, "errors": ["cut off"]}]
    for p in old:
        s.record("llm_exchange", p)
    rows = trajectory_records(s)[-2:]
    assert [(r["outcome"], r["reward"]) for r in rows] == [("invalid", -1), ("truncated", None)]
    assert rows[0]["skill"] == "refinement" and rows[0]["error"]["message"] == "$.program: missing"


def test_trajectories_are_written_per_skill(settings, graph, tmp_path):
    script = {0: [_exchange("accepted", data=_input(1.3, "a"))],
              1: [_exchange("accepted", data=_input(1.5, "b"), iteration=1, ask="a2",
                            skill="refinement")]}
    s = Session.create(problem_from_source(PROBLEM), settings.replace(iters=1), device="cpu",
                       planner=FakePlanner(), coder=ScriptedCoder(script), worker=FakeWorker(),
                       graph=graph)
    s.advance(auto=True)
    out = s.export(tmp_path / "t", trajectories=True)
    split = {p.stem: [json.loads(x) for x in p.read_text().splitlines()]
             for p in (out / "trajectories").glob("*.jsonl")}
    assert set(split) == {"planning", "generation", "refinement"}
    assert split["refinement"][0]["messages"] == [
        {"role": "system", "content": "s\n\nc"}, {"role": "user", "content": "iteration 1"}]
    assert split["refinement"][0]["completion"]["input"]["program"].startswith("import torch")
    everything = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(everything) == 3 and sum(len(v) for v in split.values()) == 3
