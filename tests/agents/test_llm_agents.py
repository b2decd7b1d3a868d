"""LLM Planner, Coder, Reviewer, replay and the OpenAI-compatible provider, offline."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")  # the optional LLM extra; GPU machines may lack it

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import HERE, FakeAPI, ok, recorded

from stitchcuda_lab.agents import get_agents
from stitchcuda_lab.agents.llm import (
    HybridCoder,
    LLMCoder,
    LLMPlanner,
    LLMReviewer,
    ReplayClient,
    make_agents,
)
from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL, ClaudeClient
from stitchcuda_lab.agents.llm.coder import candidate_from_reply
from stitchcuda_lab.errors import ConfigError, ServiceError
from stitchcuda_lab.candidate import Candidate
from stitchcuda_lab.verdict import Verdict
from stitchcuda_lab.problem import load_problem

KEY = "sk-ant-api03-AGENTS-TEST-KEY-0000"


@pytest.fixture(scope="module")
def problem():
    return load_problem(HERE / "bias_gelu_scale_problem.py")


@pytest.fixture(scope="module")
def graph(problem):
    from stitchcuda_lab.graph import analyse
    return analyse(problem, device="cpu", profile=False)


@pytest.fixture
def settings(settings, monkeypatch, tmp_path):
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_BASE_URL",
                 "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    return settings.replace(model=DEFAULT_MODEL, thinking=0, llm_backoff=0.01)


class Shelf:
    """A two-section knowledge base with the KnowledgeBase.search interface."""

    def search(self, query, k):
        return [{"id": "fusion-rules", "title": "Fusion rules", "score": 3.2,
                 "snippet": "Fuse chains of pointwise ops."},
                {"id": "cpu-openmp-vectorization", "title": "OpenMP", "score": 2.0,
                 "snippet": "OpenMP rows, SIMD columns."}][:k]


def test_planner_repairs_unknown_node_names(settings, problem, graph):
    bad = recorded("plan_reply.json")
    bad["content"][0]["input"]["tasks"][0]["ops"] = ["add", "gelu_1", "mul"]
    with FakeAPI([ok(bad), ok("plan_reply.json")]) as api:
        client = ClaudeClient(settings.replace(base_url=api.url), max_retries=0)
        plan = LLMPlanner(client, knowledge=Shelf()).plan(problem, graph, settings)
    sent = api.requests[1]["body"]["messages"][2]["content"][0]["content"]
    assert "not graph nodes: gelu_1" in sent and "nodes are: add, gelu, mul" in sent
    (task,) = plan.tasks
    assert task.ops == ["add", "gelu", "mul"] and task.kind == "pointwise_fusion"
    assert task.targets == ["aten.add.Tensor", "aten.gelu.default", "aten.mul.Tensor"]
    assert task.refs == ["fusion-rules", "cpu-openmp-vectorization"]
    assert plan.agent == "claude" and plan.device == "cpu" and plan.notes


def test_planner_without_a_knowledge_base_cites_nothing(settings, problem, graph):
    with FakeAPI([ok("plan_reply.json")]) as api:
        client = ClaudeClient(settings.replace(base_url=api.url))
        plan = LLMPlanner(client, knowledge=None).plan(problem, graph, settings)
    assert plan.tasks[0].refs == []
    assert "(none retrieved)" in api.requests[0]["body"]["system"][1]["text"]


def test_planner_prompt_has_source_graph_and_profile(settings, problem, graph):
    with FakeAPI([ok("plan_reply.json")]) as api:
        client = ClaudeClient(settings.replace(base_url=api.url))
        LLMPlanner(client, knowledge=Shelf()).plan(problem, graph, settings)
    context = api.requests[0]["body"]["system"][1]["text"]
    assert 'F.gelu(x + self.bias, approximate="tanh")' in context
    assert "aten.gelu.default" in context and "## Eager profile" in context
    assert "[fusion-rules] Fusion rules" in context


def test_coder_repairs_a_program_that_does_not_parse(settings, problem, graph):
    broken = recorded("coder_iter1_reply.json")
    broken["content"][-1]["input"]["program"] = "class ModelNew(:\n    pass\n"
    plan = _plan(settings, problem, graph)
    with FakeAPI([ok(broken), ok("coder_iter1_reply.json")]) as api:
        client = ClaudeClient(settings.replace(base_url=api.url), max_retries=0)
        (cand,) = LLMCoder(client, knowledge=Shelf()).code(problem, graph, plan, settings,
                                                            iteration=0)
    assert "$.program: SyntaxError at line 1" in \
        api.requests[1]["body"]["messages"][2]["content"][0]["content"]
    assert cand.origin == "claude" and cand.kernels[0].lang == "c"
    assert cand.params["refs"] == ["fusion-rules", "cpu-openmp-vectorization"]
    assert "SOURCES = {" in cand.module_source()


def _plan(settings, problem, graph):
    client = ReplayClient([{"role": "planner", "reply": {
        "input": recorded("plan_reply.json")["content"][0]["input"]}, "model": "m"}])
    plan = LLMPlanner(client, knowledge=Shelf()).plan(problem, graph, settings)
    plan.approved = True
    return plan


def test_reviewer_merges_the_judge_into_the_rules(settings, problem):
    cand = candidate_from_reply(recorded("coder_iter1_reply.json")["content"][-1]["input"])
    verdict = Verdict(status="pass", correct=True, speedup_vs_eager=1.4,
                      aten_ops={"aten.empty_like.default": 5})
    with FakeAPI([ok("review_reply.json")]) as api:
        client = ClaudeClient(settings.replace(base_url=api.url))
        scores = LLMReviewer(client).score(cand, verdict, problem=problem)
    body = api.requests[0]["body"]
    assert body["tool_choice"]["name"] == "submit_review"
    assert "## Rule rubric" in body["messages"][0]["content"]
    assert scores["judge"]["cuda_engineering"]["score"] == 0.8
    assert scores["cuda_engineering"]["score"] == pytest.approx(0.9)   # (1.0 + 0.8) / 2
    assert scores["anti_hacking"]["score"] == 1.0 and scores["reward"] == 2


def test_replay_serves_recorded_exchanges_in_order_and_stops(settings, problem, graph):
    records = []
    with FakeAPI([ok("coder_malformed_reply.json"), ok("coder_iter1_reply.json")]) as api:
        client = ClaudeClient(settings.replace(base_url=api.url), recorder=records.append)
        live = LLMCoder(client, knowledge=Shelf()).code(
            problem, graph, _plan(settings, problem, graph), settings, iteration=0)
    replay = ReplayClient(copy.deepcopy(records))
    again = LLMCoder(replay, knowledge=Shelf()).code(
        problem, graph, _plan(settings, problem, graph), settings, iteration=0)
    assert again[0].id == live[0].id        # the malformed attempt and its repair replayed
    with pytest.raises(ServiceError, match="no more coder exchanges"):
        LLMCoder(replay, knowledge=Shelf()).code(
            problem, graph, _plan(settings, problem, graph), settings, iteration=1)


def test_replay_reads_a_jsonl_of_events(tmp_path):
    rows = [{"kind": "plan_proposed", "payload": {}},
            {"kind": "llm_exchange", "payload": {"role": "planner", "reply": {"input": {}}}}]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    assert ReplayClient.from_session(path).remaining() == {"planner": 1}


class _Offline:
    name = "offline"

    def __init__(self, cands):
        self.cands, self.calls = cands, []

    def code(self, problem, graph, plan, settings, *, iteration, previous=None, feedback=None):
        self.calls.append(iteration)
        return self.cands


def test_hybrid_offline_first_then_llm(settings, problem, graph):
    first = Candidate(program="class ModelNew: pass", origin="offline")
    offline = _Offline([first])
    replay = ReplayClient([{"role": "coder", "model": DEFAULT_MODEL, "reply": {
        "input": recorded("coder_iter1_reply.json")["content"][-1]["input"]}}])
    hybrid = HybridCoder(offline, LLMCoder(replay, knowledge=None))
    plan = _plan(settings, problem, graph)
    assert hybrid.code(problem, graph, plan, settings, iteration=0) == [first]
    verdict = Verdict(status="pass", correct=True, speedup_vs_eager=0.8, candidate_id=first.id)
    (better,) = hybrid.code(problem, graph, plan, settings, iteration=1, previous=first,
                            feedback=verdict)
    assert offline.calls == [0] and better.origin == "claude" and better.parent == first.id
    records = []
    hybrid.recorder = records.append
    assert replay.recorder is not None


def test_hybrid_falls_back_to_the_llm_when_offline_has_nothing(settings, problem, graph):
    replay = ReplayClient([{"role": "coder", "model": DEFAULT_MODEL, "reply": {
        "input": recorded("coder_iter1_reply.json")["content"][-1]["input"]}}])
    hybrid = HybridCoder(_Offline([]), LLMCoder(replay, knowledge=None))
    (cand,) = hybrid.code(problem, graph, _plan(settings, problem, graph), settings, iteration=0)
    assert cand.origin == "claude"


def test_get_agents_hybrid_pairs_offline_planner_with_hybrid_coder(settings):
    offline = pytest.importorskip("stitchcuda_lab.agents.offline")
    if not hasattr(offline, "OfflinePlanner"):
        pytest.skip("the offline agents have not landed yet")
    planner, coder = get_agents("hybrid", settings)
    assert type(planner).__name__ == "OfflinePlanner" and isinstance(coder, HybridCoder)


# --- OpenAI-compatible provider -----------------------------------------------------------

def _chat(arguments: str) -> dict:
    reply = recorded("openai_plan_reply.json")
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return {"chat": reply}


def test_openai_compatible_server_fills_the_same_plan(settings, problem, graph):
    with FakeAPI([{"chat": recorded("openai_plan_reply.json")}]) as api:
        s = settings.replace(base_url=api.url + "/v1", model="qwen2.5-coder-32b-instruct")
        planner, coder = make_agents("openai", s, knowledge=Shelf())
        records = []
        planner.recorder = records.append
        plan = planner.plan(problem, graph, s)
    req = api.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["tool_choice"] == {"type": "function",
                                          "function": {"name": "submit_plan"}}
    assert req["body"]["tools"][0]["function"]["parameters"]["required"] == ["tasks"]
    assert req["body"]["temperature"] == 0.2 and req["body"]["max_tokens"] == 8192
    assert req["headers"]["authorization"] == "Bearer EMPTY"   # local server, no key needed
    assert plan.agent == "openai" and plan.tasks[0].ops == ["add", "gelu", "mul"]
    assert records[0]["provider"] == "openai" and records[0]["usage"]["input_tokens"] == 3011
    assert coder.client is planner.client


def test_openai_invalid_json_arguments_are_repaired(settings, problem, graph):
    good = recorded("openai_plan_reply.json")
    with FakeAPI([_chat('{"tasks": [{"id": "t1",'), {"chat": good}]) as api:
        s = settings.replace(base_url=api.url + "/v1", model="qwen2.5-coder-32b-instruct")
        planner, _ = make_agents("openai", s, knowledge=Shelf(), max_retries=0)
        plan = planner.plan(problem, graph, s)
    messages = api.requests[1]["body"]["messages"]
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"tasks": [{"id": "t1",'
    assert messages[3]["role"] == "tool" and "not valid JSON" in messages[3]["content"]
    assert plan.tasks[0].id == "t1"


def test_openai_truncation_is_asked_again_with_a_larger_budget(settings, problem, graph):
    cut = recorded("openai_plan_reply.json")
    cut["choices"][0]["finish_reason"] = "length"
    with FakeAPI([{"chat": cut}, {"chat": recorded("openai_plan_reply.json")}]) as api:
        s = settings.replace(base_url=api.url + "/v1", model="qwen2.5-coder-32b-instruct")
        planner, _ = make_agents("openai", s, knowledge=Shelf())
        plan = planner.plan(problem, graph, s)
    assert [r["body"]["max_tokens"] for r in api.requests] == [8192, 16384]
    assert plan.tasks[0].id == "t1"


def test_openai_needs_a_key_without_a_local_server(settings):
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_agents("openai", settings.replace(model="gpt-5"))


def test_openai_refuses_a_claude_model_name(settings):
    with pytest.raises(ConfigError, match="STITCH_MODEL"):
        get_agents("openai", settings.replace(model="claude-sonnet-5-5",
                                              base_url="http://127.0.0.1:9/v1"))


def test_only_the_client_module_imports_anthropic():
    import re

    import stitchcuda_lab
    root = Path(stitchcuda_lab.__file__).parent
    pattern = re.compile(r"^\s*(import anthropic|from anthropic\b)", re.MULTILINE)
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if pattern.search(p.read_text()))
    assert users == ["agents/llm/client.py"]


def test_replay_takes_the_recorded_course_through_a_broken_stream_and_a_repair(settings, problem,
                                                                             graph):
    from fake_api import broken
    records = []
    script = [broken("coder_iter1_reply.json"), ok("coder_malformed_reply.json"),
              ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        client = ClaudeClient(settings.replace(base_url=api.url), recorder=records.append)
        live = LLMCoder(client, knowledge=Shelf()).code(
            problem, graph, _plan(settings, problem, graph), settings, iteration=0)
    assert [r["outcome"] for r in records] == ["error", "invalid", "accepted"]
    again_records = []
    replay = ReplayClient(copy.deepcopy(records), recorder=again_records.append)
    again = LLMCoder(replay, knowledge=Shelf()).code(
        problem, graph, _plan(settings, problem, graph), settings, iteration=0)
    assert again[0].id == live[0].id and replay.remaining() == {}
    assert [r["outcome"] for r in again_records] == ["error", "invalid", "accepted"]


def test_replay_gives_up_where_the_recording_gave_up(settings, problem, graph):
    from stitchcuda_lab.errors import ReplyError
    records = []
    script = [ok("coder_malformed_reply.json")] * 3 + [ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        client = ClaudeClient(settings.replace(base_url=api.url), recorder=records.append)
        coder = LLMCoder(client, knowledge=Shelf())
        with pytest.raises(ReplyError):
            coder.code(problem, graph, _plan(settings, problem, graph), settings, iteration=0)
        coder.code(problem, graph, _plan(settings, problem, graph), settings, iteration=1)
    replay = LLMCoder(ReplayClient(copy.deepcopy(records)), knowledge=Shelf())
    with pytest.raises(ReplyError, match="as recorded.*missing required property") as e:
        replay.code(problem, graph, _plan(settings, problem, graph), settings, iteration=0)
    assert e.value.kind == "invalid"
    (cand,) = replay.code(problem, graph, _plan(settings, problem, graph), settings, iteration=1)
    assert cand.kernels[0].name == "bias_gelu_scale"
