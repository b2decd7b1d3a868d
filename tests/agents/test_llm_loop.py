"""The Claude agents in a whole session: recovery, memory across attempts, sampling and spend.

The agents are the real ones (the anthropic SDK against the local fake Messages API); the
Verifier is a scripted stand-in that judges each candidate by the variant marker in its kernel,
so each test says which attempt passes, fails or is faster, and runs in seconds.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import HERE, FakeAPI, broken, error, ok, recorded
from scripted import ScriptedWorker, cid, variant

from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL
from stitchcuda_lab.errors import BudgetExceeded, ConfigError
from stitchcuda_lab.problem import load_problem
from stitchcuda_lab.session import Session

KEY = "sk-ant-api03-LOOP-TEST-KEY-1234567890"
PROBLEM = HERE / "bias_gelu_scale_problem.py"
# sonnet rates, USD per million tokens: 3 in, 15 out, 3.75 cache write, 0.30 cache read
PLAN_COST = (3184 * 3 + 412 * 15 + 2930 * 3.75) / 1e6
CODER_COST = (1650 * 3 + 1240 * 15 + 4870 * 0.3) / 1e6


@pytest.fixture(scope="module")
def problem():
    return load_problem(PROBLEM)


@pytest.fixture(scope="module")
def graph(problem):
    from stitchcuda_lab.graph import analyse
    return analyse(problem, device="cpu", profile=False)


@pytest.fixture
def settings(settings, monkeypatch, tmp_path):
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    return settings.replace(model=DEFAULT_MODEL, agent="claude", llm_backoff=0.001)


def run(settings, problem, graph, script, outcomes, **kw):
    """A session driven to its end (or its first stop) against ``script``."""
    worker = ScriptedWorker(outcomes)
    lines = []
    with FakeAPI(script) as api:
        s = Session.create(problem, settings.replace(base_url=api.url, **kw), graph=graph,
                           worker=worker, on_progress=lambda m, f: lines.append(m))
        stop = None
        try:
            s.advance(auto=True)
        except (BudgetExceeded, ConfigError) as e:
            stop = e
        s.close()
    return s, api, worker, lines, stop


def coder_prompts(api) -> list[str]:
    return [r["body"]["messages"][0]["content"] for r in api.requests
            if r["body"]["tools"][0]["name"] == "submit_candidate"]


def exchanges(s, role=None):
    return [r.payload for r in s.records() if r.kind == "llm_exchange"
            and (role is None or r.payload["role"] == role)]


# ------------------------------------------------------------------ item 1: recovery


def test_a_failed_refinement_goes_back_and_the_loop_runs_to_iters(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(2)), ok(variant(3)),
              ok(variant(4))]
    s, api, worker, _, _ = run(settings, problem, graph, script,
                               {1: 1.3, 2: "incorrect", 3: 1.5, 4: 1.4}, iters=3)
    assert worker.verified == [1, 2, 3, 4]
    assert s.state.phase == "done" and "ran 3 refine iteration(s)" in s.state.message
    assert s.best()[0].id == cid(3)
    after_failure = coder_prompts(api)[2]
    assert f"## Last attempt: candidate {cid(2)} (iteration 1) failed: incorrect" in after_failure
    assert "cols 192-255 (the last 64 of every row)" in after_failure    # where it differs
    assert f"## Baseline: candidate {cid(1)}" in after_failure
    assert "Iteration 2: the last attempt failed (incorrect)" in after_failure
    assert s.state.candidates[cid(3)].parent == cid(2)


def test_a_repeated_candidate_is_sent_back_naming_the_one_it_repeats(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(1)), ok(variant(2))]
    s, api, worker, _, _ = run(settings, problem, graph, script, {1: 1.3, 2: 1.6}, iters=1)
    assert worker.verified == [1, 2]              # the repeat was never verified again
    repair = api.requests[3]["body"]["messages"]
    sent = repair[2]["content"][0]["content"] if isinstance(repair[2]["content"], list) \
        else repair[2]["content"]
    assert f"identical to candidate {cid(1)} of iteration 0" in sent and "1.30x" in sent
    outcomes = [e["outcome"] for e in exchanges(s, "coder")]
    assert outcomes == ["accepted", "repeated", "accepted"]


def test_an_iteration_without_a_usable_reply_fails_and_the_loop_goes_on(settings, problem,
                                                                          graph):
    bad = [ok("coder_malformed_reply.json")] * 3          # the reply and both repairs
    script = [ok("plan_reply.json"), ok(variant(1)), *bad, ok(variant(2))]
    s, api, worker, lines, _ = run(settings, problem, graph, script, {1: 1.2, 2: 1.4}, iters=2)
    assert worker.verified == [1, 2] and s.state.phase == "done"
    assert s.state.failures == [{"iteration": 1, "cause": "invalid",
                                 "reason": s.state.failures[0]["reason"]}]
    last = coder_prompts(api)[-1]
    assert "## Failures by cause" in last and "no candidate: invalid: 1 attempt(s)" in last
    assert "iteration 1: no candidate (invalid)" in last
    assert any("no usable candidate (invalid)" in line for line in lines)


def test_an_overload_in_the_middle_of_a_reply_is_retried_and_counted(settings, problem, graph):
    script = [ok("plan_reply.json"), broken(variant(1), after=10), ok(variant(1))]
    s, api, _, lines, _ = run(settings, problem, graph, script, {1: 1.3}, iters=0)
    assert s.state.phase == "done" and s.best()[0].id == cid(1)
    coder = exchanges(s, "coder")
    assert [e["outcome"] for e in coder] == ["error", "accepted"]
    assert coder[0]["error"]["kind"] == "overloaded"
    assert any("overloaded, retrying in" in line for line in lines)
    spend = s.spend()
    assert spend.total.exchanges == 3
    assert spend.total.input_tokens == 3184 + 1650 + 1650   # the broken stream's input counts


# ------------------------------------------------------------------ item 2: memory, sampling


def test_the_coder_sees_every_attempt_within_its_budget(settings, problem, graph):
    script = [ok("plan_reply.json")] + [ok(variant(n)) for n in range(1, 6)]
    outcomes = {1: 1.1, 2: "build_error", 3: 1.2, 4: "incorrect", 5: 1.25}
    s, api, _, _, _ = run(settings, problem, graph, script, outcomes, iters=4)
    last = coder_prompts(api)[-1]
    history = last.split("## Attempts so far (newest first)")[1].split("##")[0]
    lines = [x for x in history.strip().splitlines() if x.startswith("- ")]
    assert [re.search(r"iteration (\d)", x).group(1) for x in lines] == ["3", "2", "1", "0"]
    assert "build_error" in history and "variant 2: rows split" in history
    assert "1.20x vs eager" in history
    causes = last.split("## Failures by cause")[1]
    assert "build_error / build_error: 1 attempt(s) (iterations 1)" in causes
    assert "expected ';' before '}'" in causes
    # a tight budget keeps the newest lines and says how many were left out
    s2, api2, _, _, _ = run(settings, problem, graph, script, outcomes, iters=4,
                            memory_tokens=40)
    tight = coder_prompts(api2)[-1].split("## Attempts so far")[1].split("##")[0]
    assert "iteration 3" in tight and "iteration 0" not in tight
    assert "earlier attempt(s) left out (token budget)" in tight


def test_candidates_k_samples_k_per_iteration_each_told_the_others(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(2)), ok(variant(3)),
              ok(variant(4))]
    s, api, worker, _, _ = run(settings, problem, graph, script,
                               {1: 1.1, 2: 1.4, 3: 1.5, 4: 1.2}, iters=1, candidates=2)
    assert sorted(worker.verified[:2]) == [1, 2] and sorted(worker.verified[2:]) == [3, 4]
    prompts = coder_prompts(api)
    assert "sample 1 of 2" in prompts[0] and "sample 2 of 2" in prompts[1]
    assert f"{cid(1)}: variant 1: rows split" in prompts[1]
    assert f"## Baseline: candidate {cid(2)}" in prompts[2]      # the better sample of iteration 0
    proposed = [r.payload["candidates"] for r in s.records() if r.kind == "candidates_proposed"]
    assert [len(p) for p in proposed] == [2, 2]
    assert [e["sample"] for e in exchanges(s, "coder")] == [0, 1, 0, 1]
    assert s.best()[0].id == cid(3)


def test_a_sample_repeating_its_sibling_goes_back(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(1)), ok(variant(2))]
    s, api, worker, _, _ = run(settings, problem, graph, script, {1: 1.1, 2: 1.3}, iters=0,
                               candidates=2)
    assert sorted(worker.verified) == [1, 2]
    assert [e["outcome"] for e in exchanges(s, "coder")] == ["accepted", "repeated", "accepted"]


# ------------------------------------------------------------------ item 3: context


def test_the_context_has_the_hardware_and_the_verifiers_eager_time(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1))]
    s, api, _, _, _ = run(settings, problem, graph, script, {1: 1.3}, iters=0)
    for req in api.requests:
        context = req["body"]["system"][1]["text"]
        assert "## Hardware" in context and "CPU cores for OpenMP" in context
        assert "memory bandwidth" in context and "GB/s" in context
        assert "eager forward: 1 ms, timed by the Verifier" in context
        assert "torch.compile (default): 0.8 ms" in context
    facts = [r.payload for r in s.records() if r.kind == "facts"]
    assert len(facts) == 1 and facts[0]["device"]["cores"] >= 1


# ------------------------------------------------------------------ item 4: spend and caps


def test_spend_is_summed_per_exchange_iteration_and_session(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(2))]
    s, _, _, lines, _ = run(settings, problem, graph, script, {1: 1.2, 2: 1.3}, iters=1)
    spend = s.spend()
    assert spend.total.exchanges == 3
    assert spend.total.cost_usd == pytest.approx(PLAN_COST + 2 * CODER_COST)
    assert spend.by_iteration["plan"].cost_usd == pytest.approx(PLAN_COST)
    assert spend.by_iteration["0"].output_tokens == spend.by_iteration["1"].output_tokens == 1240
    assert spend.by_role["coder"].cache_read_tokens == 2 * 4870
    assert any("session 22.0k tokens" in line and "$0.0767" in line for line in lines), lines
    again = Session.open(s.dir, settings, lock=False)          # from the log, on reopening
    assert again.spend().to_dict() == spend.to_dict()
    meta = again.log.meta()["spend"]
    assert meta["cost_usd"] == pytest.approx(spend.total.cost_usd, abs=1e-6)
    assert meta["by_iteration"]["plan"]["total_tokens"] == 3184 + 2930 + 412


def test_max_cost_stops_before_the_next_request_and_resume_carries_on(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(2)), ok(variant(3))]
    s, api, worker, _, stop = run(settings, problem, graph, script, {1: 1.2, 2: 1.3, 3: 1.4},
                                  iters=2, max_cost=PLAN_COST + CODER_COST * 1.5)
    assert isinstance(stop, BudgetExceeded) and "--max-cost" in stop.message
    assert api.count == 3 and worker.verified == [1, 2]       # stopped before the third coder
    assert s.log.info()["status"] == "paused"
    assert [r.kind for r in s.records()][-1] == "budget_reached"
    with FakeAPI([ok(variant(3))]) as api2:
        again = Session.open(s.dir, settings.replace(base_url=api2.url, max_cost=1.0),
                             worker=ScriptedWorker({3: 1.4}))
        again.advance(auto=True)
        again.close()
    assert again.state.phase == "done" and again.best()[0].id == cid(3) and api2.count == 1


def test_max_tokens_caps_the_sessions_tokens(settings, problem, graph):
    script = [ok("plan_reply.json"), ok(variant(1)), ok(variant(2))]
    s, api, _, _, stop = run(settings, problem, graph, script, {1: 1.2, 2: 1.3}, iters=1,
                             max_total_tokens=1000)
    assert isinstance(stop, BudgetExceeded) and api.count == 1      # the plan, then nothing


def test_max_cost_with_an_unpriced_model_says_how_to_price_it(settings, problem, graph):
    served = recorded("plan_reply.json")
    served["model"] = "my-finetune"
    s, api, _, _, stop = run(settings.replace(model="claude-my-finetune"), problem, graph,
                             [ok(served), ok(variant(1))], {1: 1.2}, iters=0, max_cost=1.0)
    assert isinstance(stop, BudgetExceeded) and "STITCH_PRICE" in stop.hint
    assert api.count == 0                                   # not even the plan was asked for
    s2, api2, _, _, stop2 = run(settings.replace(model="claude-my-finetune", price="3,15"),
                                problem, graph, [ok(served), ok(variant(1))], {1: 1.2},
                                iters=0, max_cost=1.0)
    assert stop2 is None and s2.state.phase == "done"


def test_a_rejected_key_mid_run_stops_resumably(settings, problem, graph):
    script = [ok("plan_reply.json"), error(401, "authentication_error", "invalid x-api-key",
                                           None)]
    s, api, _, _, stop = run(settings, problem, graph, script, {1: 1.2}, iters=0)
    assert isinstance(stop, ConfigError) and api.count == 2
    assert s.log.info()["status"] == "paused" and "rejected the API key" in s.log.meta()["paused"]
    with FakeAPI([ok(variant(1))]) as api2:
        again = Session.open(s.dir, settings.replace(base_url=api2.url),
                             worker=ScriptedWorker({1: 1.2}))
        again.advance(auto=True)
        again.close()
    assert again.state.phase == "done" and again.best()[0].id == cid(1)
