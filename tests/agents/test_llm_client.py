"""The Claude client through the real anthropic SDK against a local fake Messages API.

Every test serves recorded replies (tests/fixtures/llm/) from a threaded HTTP server on
127.0.0.1 and asserts what the SDK sent and what the client made of the answer.
"""

from __future__ import annotations

import itertools
import socket
import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")  # the optional LLM extra; GPU machines may lack it

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import FakeAPI, error, ok, recorded

from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL, ClaudeClient
from stitchcuda_lab.agents.llm.coder import CANDIDATE_TOOL, check_candidate
from stitchcuda_lab.agents.llm.structured import Request
from stitchcuda_lab.errors import ConfigError, ServiceError

KEY = "sk-ant-api03-FAKE-KEY-for-tests-0123456789abcdef"
_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_BASE_URL",
        "ANTHROPIC_IDENTITY_TOKEN", "ANTHROPIC_IDENTITY_TOKEN_FILE",
        "ANTHROPIC_FEDERATION_RULE_ID", "ANTHROPIC_ORGANIZATION_ID", "ANTHROPIC_CUSTOM_HEADERS")


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """No Anthropic credentials anywhere the SDK looks (env, profiles)."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))


@pytest.fixture
def api_key(no_credentials, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    return KEY


def coder_request() -> Request:
    return Request(role="coder", task="t1", iteration=0, system="You are the Coder." * 50,
                   context="# Problem\nbias + gelu + scale", user="Write the candidate.",
                   tool=CANDIDATE_TOOL, refs=["fusion-rules"],
                   check=lambda d: check_candidate(d, "c"))


@pytest.fixture
def settings(settings):
    return settings.replace(model=DEFAULT_MODEL)


def client(settings, api, **kw) -> ClaudeClient:
    kw.setdefault("max_retries", 2)
    return ClaudeClient(settings.replace(base_url=api.url), **kw)


def test_structured_reply_comes_from_the_forced_tool(settings, api_key):
    with FakeAPI([ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api).ask(coder_request())
    assert reply.data["kernels"][0]["name"] == "bias_gelu_scale"
    assert reply.attempts == 1
    body = api.requests[0]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": "submit_candidate",
                                   "disable_parallel_tool_use": True}
    assert body["tools"][0]["input_schema"]["required"] == ["kernels", "program", "replaced",
                                                            "kept"]
    assert body["stream"] is True


def test_prompt_caching_marks_the_stable_prefix(settings, api_key):
    with FakeAPI([ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api).ask(coder_request())
    system = api.requests[0]["body"]["system"]
    assert [b["cache_control"] for b in system] == [{"type": "ephemeral"}] * 2
    assert system[0]["text"].startswith("You are the Coder.")
    # the per-turn message is not in the cached prefix
    assert api.requests[0]["body"]["messages"] == [{"role": "user",
                                                    "content": "Write the candidate."}]
    assert reply.usage["cache_read_input_tokens"] == 4870


def test_streaming_reports_progress(settings, api_key):
    events = []
    with FakeAPI([ok("coder_iter1_reply.json")]) as api:
        client(settings, api, progress=events.append).ask(coder_request())
    phases = [e["phase"] for e in events]
    assert phases[0] == "start" and phases[-1] == "done"
    streamed = [e["chars"] for e in events if e["phase"] == "streaming"]
    assert len(streamed) >= 5 and streamed == sorted(streamed)
    assert all(b - a >= 256 for a, b in itertools.pairwise(streamed))
    assert events[-1]["usage"]["output_tokens"] == 1240


def test_malformed_tool_input_is_repaired_once(settings, api_key):
    records = []
    with FakeAPI([ok("coder_malformed_reply.json"), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api, recorder=records.append).ask(coder_request())
    assert reply.attempts == 2
    repair = api.requests[1]["body"]["messages"]
    assert repair[1]["content"][0]["type"] == "tool_use"
    result = repair[2]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert result["tool_use_id"] == "toolu_01Bad1"
    assert "missing required property 'program'" in result["content"]
    assert "'cpp' is not one of ['cuda', 'c']" in result["content"]
    assert [r["attempt"] for r in records] == [1, 2]
    assert records[0]["errors"] and not records[1]["errors"]


def test_malformed_twice_is_a_clear_service_error(settings, api_key):
    with (FakeAPI([ok("coder_malformed_reply.json"), ok("coder_malformed_reply.json")]) as api,
          pytest.raises(ServiceError, match="malformed submit_candidate reply .* twice")):
        client(settings, api).ask(coder_request())
    assert api.count == 2


def test_semantic_check_failure_goes_back_to_the_model(settings, api_key):
    cuda = recorded("coder_iter1_reply.json")
    cuda["content"][-1]["input"]["kernels"][0]["lang"] = "cuda"   # wrong language for the CPU
    with FakeAPI([ok(cuda), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api).ask(coder_request())
    assert reply.attempts == 2
    sent = api.requests[1]["body"]["messages"][2]["content"][0]["content"]
    assert "the device needs lang 'c', not 'cuda'" in sent


def test_refusal_is_a_service_error_with_the_category(settings, api_key):
    records = []
    with (FakeAPI([ok("refusal_reply.json")]) as api,
          pytest.raises(ServiceError, match=r"declined .*refusal.*cyber")):
        client(settings, api, recorder=records.append).ask(coder_request())
    assert records[0]["reply"]["stop_reason"] == "refusal"


def test_truncated_reply_names_max_tokens(settings, api_key):
    with (FakeAPI([ok("truncated_reply.json")]) as api,
          pytest.raises(ServiceError, match="cut off at max_tokens=8192") as e):
        client(settings, api).ask(coder_request())
    assert "STITCH_MAX_TOKENS" in str(e.value)
    assert api.count == 1   # no blind retry of an expensive truncated call


@pytest.mark.parametrize("status,kind", [(429, "rate_limit_error"), (529, "overloaded_error")])
def test_rate_limit_and_overload_are_retried_by_the_sdk(settings, api_key, status, kind):
    script = [error(status, kind, "slow down"), error(status, kind, "slow down"),
              ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        reply = client(settings, api, max_retries=2).ask(coder_request())
    assert api.count == 3 and reply.attempts == 1


@pytest.mark.parametrize("status,kind,words", [(429, "rate_limit_error", "rate limiting"),
                                               (529, "overloaded_error", "overloaded")])
def test_exhausted_retries_say_what_happened(settings, api_key, status, kind, words):
    with (FakeAPI([error(status, kind, "busy")] * 3) as api,
          pytest.raises(ServiceError, match=f"{words} .*2 retries") as e):
        client(settings, api, max_retries=2).ask(coder_request())
    assert api.count == 3
    assert f"({status})" in str(e.value)


def test_timeout_is_a_service_error(settings, api_key):
    with FakeAPI([ok("coder_iter1_reply.json", delay=3.0)]) as api:
        c = ClaudeClient(settings.replace(base_url=api.url, llm_timeout=0.5), max_retries=0)
        with pytest.raises(ServiceError, match=r"did not answer within 0.5 s") as e:
            c.ask(coder_request())
    assert "STITCH_LLM_TIMEOUT" in str(e.value)


def test_connection_refused_is_a_service_error(settings, api_key):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]      # closed again: nothing listens there
    c = ClaudeClient(settings.replace(base_url=f"http://127.0.0.1:{port}"), max_retries=0)
    with pytest.raises(ServiceError, match="cannot reach Claude"):
        c.ask(coder_request())


def test_rejected_key_is_a_config_error(settings, api_key):
    with (FakeAPI([error(401, "authentication_error", "invalid x-api-key", None)]) as api,
          pytest.raises(ConfigError, match="rejected the API key") as e):
        client(settings, api).ask(coder_request())
    assert "ANTHROPIC_API_KEY" in str(e.value) and KEY not in str(e.value)


def test_missing_key_is_a_config_error_naming_the_variable(settings, no_credentials):
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        ClaudeClient(settings)


def test_missing_key_without_any_profile_folder(settings, no_credentials, monkeypatch, tmp_path):
    monkeypatch.delenv("ANTHROPIC_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        ClaudeClient(settings)


def test_missing_key_through_get_agents(settings, no_credentials):
    from stitchcuda_lab.agents import get_agents
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_agents("claude", settings)


def test_key_is_sent_but_never_recorded(settings, api_key):
    records, events = [], []
    with FakeAPI([ok("coder_malformed_reply.json"), ok("coder_iter1_reply.json")]) as api:
        client(settings, api, recorder=records.append, progress=events.append).ask(
            coder_request())
    sent = api.requests[0]["headers"]
    assert KEY in (sent.get("x-api-key", "") + sent.get("authorization", ""))
    assert KEY not in repr(records) and KEY not in repr(events)
    assert not any("header" in k for r in records for k in r)


def test_exchange_record_has_the_session_payload_fields(settings, api_key):
    records = []
    with FakeAPI([ok("coder_iter1_reply.json")]) as api:
        client(settings, api, recorder=records.append).ask(coder_request())
    (r,) = records
    assert {"role", "task", "prompt", "reply", "model", "usage"} <= set(r)
    assert r["role"] == "coder" and r["task"] == "t1" and r["model"] == "claude-sonnet-5-5"
    assert r["prompt"]["user"] == "Write the candidate." and r["refs"] == ["fusion-rules"]
    assert r["reply"]["input"]["kernels"][0]["lang"] == "c"
    assert r["usage"] == {"input_tokens": 1650, "output_tokens": 1240,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4870}


def test_settings_choose_model_and_max_tokens(settings, api_key):
    with FakeAPI([ok("coder_iter1_reply.json")]) as api:
        c = ClaudeClient(settings.replace(base_url=api.url, model="claude-opus-4-8",
                                          max_tokens=20000))
        c.ask(coder_request())
    body = api.requests[0]["body"]
    assert body["model"] == "claude-opus-4-8" and body["max_tokens"] == 20000


def test_default_model_is_one_the_sdk_knows_and_does_not_deprecate(settings, api_key):
    import typing
    import warnings

    from anthropic.types.model import Model

    assert DEFAULT_MODEL in typing.get_args(typing.get_args(Model)[0])
    with FakeAPI([ok("coder_iter1_reply.json")]) as api, warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)   # the SDK warns on deprecated
        ClaudeClient(settings.replace(base_url=api.url, model=DEFAULT_MODEL)).ask(
            coder_request())
    assert api.requests[0]["body"]["model"] == DEFAULT_MODEL
