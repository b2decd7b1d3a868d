"""The LLM judge in a session: with ``judge`` on, each verdict's rubric merges the judge's scores."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")  # the optional LLM extra

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import FakeAPI, error, ok

from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL, ClaudeClient
from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
from stitchcuda_lab.problem import load_problem
from stitchcuda_lab.session import Session

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "layernorm_gelu.py"


class JudgedCoder(OfflineCoder):
    """The offline coder, with the LLM client a Claude coder would hold."""

    def __init__(self, client):
        super().__init__()
        self.client = client


@pytest.fixture
def settings(settings, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-JUDGE-TEST-KEY-0000")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    return settings.replace(model=DEFAULT_MODEL, iters=0, timing_trials=3, judge=True,
                             thinking=0)


def _run(settings, script):
    with FakeAPI(script) as api:
        client = ClaudeClient(settings.replace(base_url=api.url), max_retries=0)
        session = Session.create(load_problem(EXAMPLE), settings, planner=OfflinePlanner(),
                                 coder=JudgedCoder(client))
        session.advance(auto=True)
    return session, api


def test_judge_scores_merge_into_the_verdicts_rubric(settings):
    session, api = _run(settings, [ok("review_reply.json")] * 4)
    verdicts = list(session.state.verdicts.values())
    assert verdicts and api.requests
    assert api.requests[0]["body"]["tool_choice"]["name"] == "submit_review"
    judged = verdicts[0].rubric
    assert judged["judge"]["cuda_engineering"]["score"] == 0.8
    assert verdicts[0].reward in (1, 2, 3)


def test_a_failing_judge_keeps_the_rule_scores(settings):
    session, _ = _run(settings, [error(400, "invalid_request_error", "bad request")] * 4)
    v = list(session.state.verdicts.values())[0]
    assert "judge_error" in v.rubric and "judge" not in v.rubric
    assert set(v.rubric) >= {"anti_hacking", "cuda_engineering", "coverage", "compliance"}


def test_judge_off_makes_no_request(settings):
    session, api = _run(settings.replace(judge=False), [ok("review_reply.json")])
    assert not api.requests
    assert list(session.state.verdicts.values())[0].rubric
