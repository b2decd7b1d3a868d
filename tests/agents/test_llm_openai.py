"""The OpenAI-compatible provider through the real openai SDK against a local chat server:
streaming with usage, reasoning models, servers that refuse a parameter, retries."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import FakeAPI, chat, error, recorded

from stitchcuda_lab.agents.llm.openai_client import OpenAIClient
from stitchcuda_lab.agents.llm.planner import PLAN_TOOL
from stitchcuda_lab.agents.llm.structured import Request
from stitchcuda_lab.errors import ConfigError, ReplyError


@pytest.fixture
def settings(settings, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return settings.replace(model="qwen2.5-coder-32b-instruct", llm_backoff=0.001)


def plan_request() -> Request:
    return Request(role="planner", task="plan", system="You plan.", context="# Problem",
                   user="Call submit_plan.", tool=PLAN_TOOL)


def reply(**changes) -> dict:
    r = recorded("openai_plan_reply.json")
    r["choices"][0]["message"].update(changes.pop("message", {}))
    r.update(changes)
    return r


def client(settings, api, **kw) -> OpenAIClient:
    return OpenAIClient(settings.replace(base_url=api.url + "/v1", **kw), sleep=lambda s: None)


def test_the_reply_streams_with_its_usage(settings):
    events, records = [], []
    usage = {"prompt_tokens": 3011, "completion_tokens": 388, "total_tokens": 3399,
             "prompt_tokens_details": {"cached_tokens": 2048}}
    with FakeAPI([chat(reply(usage=usage))]) as api:
        c = client(settings, api)
        c.progress, c.recorder = events.append, records.append
        out = c.ask(plan_request())
    body = api.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 8192 and body["temperature"] == 0.2
    assert out.data["tasks"][0]["ops"] == ["add", "gelu", "mul"]
    assert records[0]["usage"] == {"input_tokens": 3011 - 2048, "output_tokens": 388,
                                   "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 2048}
    assert [e["phase"] for e in events if e["phase"] == "streaming"]   # progress per delta
    assert records[0]["cost_usd"] == 0.0                  # a model served on this machine


def test_reasoning_models_get_max_completion_tokens_and_no_temperature(settings):
    with FakeAPI([chat(reply(model="o4-mini"))]) as api:
        client(settings, api, model="o4-mini").ask(plan_request())
    body = api.requests[0]["body"]
    assert body["max_completion_tokens"] == 8192
    assert "max_tokens" not in body and "temperature" not in body


def test_a_server_that_refuses_max_tokens_is_asked_the_reasoning_way(settings):
    refuse = error(400, "invalid_request_error", "Unsupported parameter: 'max_tokens' is not "
                   "supported with this model. Use 'max_completion_tokens' instead.", None)
    with FakeAPI([refuse, chat(reply())]) as api:
        client(settings, api, model="gpt-next").ask(plan_request())
    first, second = (r["body"] for r in api.requests)
    assert "max_tokens" in first and "max_completion_tokens" in second
    assert "temperature" not in second


def test_a_server_without_stream_options_is_asked_without_them(settings):
    refuse = error(400, "invalid_request_error", "Unrecognized request argument: "
                   "stream_options", None)
    with FakeAPI([refuse, chat(reply())]) as api:
        out = client(settings, api).ask(plan_request())
    assert "stream_options" not in api.requests[1]["body"] and out.data["tasks"]


def test_reasoning_text_is_kept_in_the_record(settings):
    records = []
    thought = "Three pointwise ops on one tensor: one fused pass."
    with FakeAPI([chat(reply(message={"reasoning_content": thought}))]) as api:
        c = client(settings, api)
        c.recorder = records.append
        c.ask(plan_request())
    assert records[0]["reply"]["thinking"] == thought


def test_rate_limits_are_retried_honouring_retry_after(settings):
    waits = []
    with FakeAPI([error(429, "rate_limit_error", "slow", retry_after_ms=None, retry_after="3"),
                  chat(reply())]) as api:
        c = OpenAIClient(settings.replace(base_url=api.url + "/v1"), sleep=waits.append)
        c.ask(plan_request())
    assert api.count == 2 and waits == [3.0]


def test_a_cut_reply_is_asked_again_with_a_larger_budget(settings):
    with FakeAPI([chat(reply(choices=[{**reply()["choices"][0], "finish_reason": "length"}])),
                  chat(reply())]) as api:
        client(settings, api).ask(plan_request())
    assert [r["body"]["max_tokens"] for r in api.requests] == [8192, 16384]


def test_a_refusal_twice_is_a_reply_error(settings):
    refusal = reply(message={"content": None, "tool_calls": None,
                             "refusal": "I can't help with that."})
    with FakeAPI([chat(refusal), chat(refusal)]) as api, \
            pytest.raises(ReplyError, match="declined to answer twice") as e:
        client(settings, api).ask(plan_request())
    assert e.value.kind == "refused" and api.count == 2


def test_an_unknown_model_is_a_config_error(settings):
    with FakeAPI([error(404, "not_found_error", "model not found", None)]) as api, \
            pytest.raises(ConfigError, match="does not serve that model"):
        client(settings, api).ask(plan_request())
