"""The whole LLM loop offline: Session with agent "claude" against recorded replies.

plan -> candidate with a real C kernel (wrong GELU form) -> incorrect verdict -> refine with
the Verifier's feedback (the first try of that reply breaks with an overloaded_error event
mid-stream and is retried) -> passing verdict; then the same session replayed without
network, exported as trajectories, and searched for the API key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")  # the optional LLM extra; GPU machines may lack it

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import HERE, FakeAPI, broken, ok

from stitchcuda_lab.agents import rubric
from stitchcuda_lab.agents.llm import make_replay_agents
from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL
from stitchcuda_lab.export import trajectory_records
from stitchcuda_lab.problem import load_problem
from stitchcuda_lab.session import Session
from stitchcuda_lab.settings import Settings

KEY = "sk-ant-api03-FLOW-TEST-KEY-9f8e7d6c5b4a"
_CRED_ENV = ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_BASE_URL",
             "ANTHROPIC_IDENTITY_TOKEN", "ANTHROPIC_IDENTITY_TOKEN_FILE")


def _settings(root: Path, **kw) -> Settings:
    return Settings(sessions_dir=str(root / "sessions"), cache_dir=str(root / "cache"),
                    device="cpu", trials=5, timing_trials=5, warmup=1, compile_modes="",
                    timeout=120.0, profile=False, iters=1, model=DEFAULT_MODEL, **kw)


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm_flow")
    with pytest.MonkeyPatch.context() as mp:
        for name in _CRED_ENV:
            mp.delenv(name, raising=False)
        mp.setenv("ANTHROPIC_API_KEY", KEY)
        mp.setenv("ANTHROPIC_CONFIG_DIR", str(root / "anthropic-config"))
        script = [ok("plan_reply.json"), ok("coder_iter0_reply.json"),
                  broken("coder_iter1_reply.json", after=20), ok("coder_iter1_reply.json")]
        with FakeAPI(script) as api:
            settings = _settings(root, base_url=api.url, llm_backoff=0.01)
            session = Session.create(load_problem(HERE / "bias_gelu_scale_problem.py"),
                                     settings, agent="claude")
            session.advance(auto=True)
            worker_pid = session._worker.pid if session._worker is not None else None
            worker_env = (Path(f"/proc/{worker_pid}/environ").read_bytes()
                          if worker_pid and Path(f"/proc/{worker_pid}").exists() else None)
            export_dir = session.export(root / "export", trajectories=True)
            records = session.records()
            session.close()
    return {"root": root, "api": api, "session": session, "records": records,
            "worker_env": worker_env, "export": Path(export_dir), "settings": settings}


def _kinds(records, kind):
    return [r.payload for r in records if r.kind == kind]


def test_plan_refine_pass(flow):
    verdicts = [p["verdict"] for p in _kinds(flow["records"], "verdict_ready")]
    assert [v["status"] for v in verdicts] == ["incorrect", "pass"]
    cand, verdict = flow["session"].best()
    assert cand.iteration == 1 and cand.origin == "claude" and verdict.correct
    assert cand.parent == verdicts[0]["candidate_id"]
    assert flow["api"].count == 4


def test_refine_prompt_carries_the_verifier_feedback(flow):
    user = flow["api"].requests[3]["body"]["messages"][0]["content"]
    assert "status: incorrect" in user and "mismatching elements" in user
    assert "erff(v * 0.70710678f)" in user          # the previous kernel, to fix
    assert "Iteration 1: the last attempt failed (incorrect)" in user


def test_coder_prompt_teaches_the_runtime_contract(flow):
    system = flow["api"].requests[1]["body"]["system"][0]["text"]
    for phrase in ('runtime.load(SOURCES["fused_0"], lang=LANGS["fused_0"], name="fused_0")',
                   '.call("fn", x, out, n, 0.5)', "Python `int` -> 64-bit integer",
                   "Python `float` -> 32-bit float", "torch.manual_seed(seed); ModelNew",
                   "no PyTorch fallback", 'extern "C" __global__'):
        assert phrase in system


def test_retrieved_sections_are_in_the_prompt_the_task_and_the_record(flow):
    exchanges = _kinds(flow["records"], "llm_exchange")
    assert [e["role"] for e in exchanges] == ["planner", "coder", "coder", "coder"]
    shown = exchanges[0]["refs"]
    assert "fusion-rules" in shown and "cpu-openmp-vectorization" in shown
    context = flow["api"].requests[0]["body"]["system"][1]["text"]
    assert all(f"[{ref}]" in context for ref in shown)
    plan = _kinds(flow["records"], "plan_proposed")[0]["plan"]
    # the reply cited one id that was never shown: it is dropped
    assert plan["tasks"][0]["refs"] == ["fusion-rules", "cpu-openmp-vectorization"]
    assert plan["agent"] == "claude"


def test_exchanges_record_model_and_usage(flow):
    broke, e = _kinds(flow["records"], "llm_exchange")[2:]
    assert broke["outcome"] == "error" and broke["error"]["kind"] == "overloaded"
    assert broke["ask"] == e["ask"] and (broke["attempt"], e["attempt"]) == (1, 2)
    assert e["model"] == "claude-sonnet-5-5" and e["task"] == "t1" and e["iteration"] == 1
    assert e["usage"]["cache_read_input_tokens"] == 4870
    assert e["reply"]["input"]["kernels"][0]["name"] == "bias_gelu_scale"


def test_no_key_in_session_export_or_worker(flow):
    files = [p for p in flow["root"].rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in files)
    assert any(p.name == "trajectories.jsonl" for p in files)
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaked == []
    assert flow["worker_env"], "the Verifier's worker should be alive after the run"
    assert KEY.encode() not in flow["worker_env"]
    assert b"ANTHROPIC_API_KEY" not in flow["worker_env"]


def test_rubric_scores_the_passing_candidate(flow):
    cand, verdict = flow["session"].best()
    graph = flow["session"].graph
    ops = [n.target for n in graph.nodes if n.op == "call_function"]
    s = rubric.score(cand, verdict, reference_ops=ops)
    assert s["coverage"]["score"] == 1.0
    assert s["compliance"]["score"] == 1.0
    assert s["anti_hacking"]["score"] == 1.0
    assert s["cuda_engineering"]["score"] == 1.0     # OpenMP rows, SIMD, restrict
    assert s["reward"] == rubric.reward(verdict) >= 1


def test_trajectories_pair_each_coder_reply_with_its_verdict(flow):
    verdicts = [p["verdict"] for p in _kinds(flow["records"], "verdict_ready")]
    rows = [r for r in trajectory_records(flow["session"]) if r["role"] == "coder"]
    assert [r["iteration"] for r in rows] == [0, 1, 1]
    assert [r["skill"] for r in rows] == ["generation", "refinement", "refinement"]
    assert [r["outcome"] for r in rows] == ["accepted", "error", "accepted"]
    assert [r["reward"] for r in rows] == [-1, None, rubric.reward(verdicts[1])]
    assert rows[0]["verdict"]["status"] == "incorrect" and rows[1]["verdict"] is None
    assert all(r["model"] == DEFAULT_MODEL and r["usage"]["output_tokens"] for r in rows)
    assert all(json.dumps(r) for r in rows)


def test_session_replays_without_network(flow, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    planner, coder = make_replay_agents(flow["session"].dir)
    settings = _settings(tmp_path, base_url="http://127.0.0.1:9")   # nothing listens there
    replayed = Session.create(load_problem(HERE / "bias_gelu_scale_problem.py"), settings,
                              agent="claude", planner=planner, coder=coder)
    try:
        replayed.advance(auto=True)
        best = replayed.best()
        assert best is not None and best[0].id == flow["session"].best()[0].id
        again = _kinds(replayed.records(), "llm_exchange")              # recorded again
        assert [x["outcome"] for x in again] == ["accepted", "accepted", "error", "accepted"]
    finally:
        replayed.close()


def test_hybrid_offline_first_candidate_then_claude(tmp_path, monkeypatch):
    offline = pytest.importorskip("stitchcuda_lab.agents.offline")
    if not hasattr(offline, "OfflineCoder"):
        pytest.skip("the offline agents have not landed yet")
    for name in _CRED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    with FakeAPI([ok("coder_iter1_reply.json")]) as api:
        settings = _settings(tmp_path, base_url=api.url)
        session = Session.create(load_problem(HERE / "bias_gelu_scale_problem.py"), settings,
                                 agent="hybrid")
        try:
            session.advance(auto=True)
            records = session.records()
        finally:
            session.close()
    proposed = [c for p in _kinds(records, "candidates_proposed") for c in p["candidates"]]
    assert [(c["iteration"], c["origin"]) for c in proposed] == [(0, "offline"), (1, "claude")]
    assert api.count == 1                       # the plan and the first candidate are offline
    user = api.requests[0]["body"]["messages"][0]["content"]
    assert f"candidate {proposed[0]['id']} (iteration 0)" in user
    assert "Verifier feedback" in user
    assert proposed[1]["parent"] == proposed[0]["id"]
    assert [e["role"] for e in _kinds(records, "llm_exchange")] == ["coder"]


def test_exported_trajectories_are_split_by_skill(flow):
    folder = flow["export"] / "trajectories"
    rows = {skill: [json.loads(x) for x in (folder / f"{skill}.jsonl").read_text().splitlines()]
            for skill in ("planning", "generation", "refinement")}
    assert [len(v) for v in rows.values()] == [1, 1, 2]
    refine = rows["refinement"][-1]
    assert refine["messages"][0]["role"] == "system" and "## Last attempt" in \
        refine["messages"][1]["content"]
    assert refine["completion"]["input"]["kernels"][0]["name"] == "bias_gelu_scale"
    assert refine["cost_usd"] > 0 and refine["verdict"]["status"] == "pass"
