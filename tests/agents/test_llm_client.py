"""The Claude client through the real anthropic SDK against a local fake Messages API.

Every test serves recorded replies (tests/fixtures/llm/) from a threaded HTTP server on
127.0.0.1, as the API sends them (SSE streams, error bodies and headers, error events inside a
stream that began with HTTP 200), and asserts what the SDK sent and what the client made of the
answer: the reply, the retries and their waits, the records.
"""

from __future__ import annotations

import copy
import itertools
import socket
import sys
from pathlib import Path

import pytest

pytest.importorskip("anthropic")  # the optional LLM extra; GPU machines may lack it

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "llm"))
from fake_api import FakeAPI, broken, error, ok, recorded

from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL, ClaudeClient
from stitchcuda_lab.agents.llm.coder import CANDIDATE_TOOL, check_candidate
from stitchcuda_lab.agents.llm.structured import REFUSAL_NOTE, Request
from stitchcuda_lab.errors import ConfigError, ReplyError, ServiceError

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
    return settings.replace(model=DEFAULT_MODEL, thinking=0)


class Waits(list):
    """A sleep that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(settings, api, **kw) -> ClaudeClient:
    kw.setdefault("max_retries", 2)
    kw.setdefault("sleep", Waits())
    return ClaudeClient(settings.replace(base_url=api.url), **kw)


def with_thinking(name: str) -> dict:
    """A recorded reply with a thinking block (and its signature) before the tool call."""
    m = recorded(name)
    m["content"].insert(0, {"type": "thinking", "signature": "sig-Ab12==",
                            "thinking": "The tanh form must match aten.gelu(approximate='tanh')."})
    return m


# ------------------------------------------------------------------ the request


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
    assert body["stream"] is True and "thinking" not in body


def test_thinking_offers_the_tool_and_adds_its_budget_to_max_tokens(settings, api_key):
    records = []
    with FakeAPI([ok(with_thinking("coder_iter1_reply.json"))]) as api:
        reply = client(settings.replace(thinking=2048), api, recorder=records.append).ask(
            coder_request())
    body = api.requests[0]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body["max_tokens"] == 8192 + 2048
    assert reply.data["kernels"][0]["lang"] == "c"
    assert "approximate='tanh'" in records[0]["reply"]["thinking"]


def test_a_repair_after_thinking_sends_the_signed_thinking_block_back(settings, api_key):
    bad = with_thinking("coder_malformed_reply.json")
    with FakeAPI([ok(bad), ok("coder_iter1_reply.json")]) as api:
        client(settings.replace(thinking=2048), api).ask(coder_request())
    assistant = api.requests[1]["body"]["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "tool_use"]
    assert assistant[0]["signature"] == "sig-Ab12=="


def test_a_server_without_thinking_is_asked_again_without_it(settings, api_key):
    events = []
    refuse = error(400, "invalid_request_error", "thinking: extra inputs are not permitted",
                   None)
    with FakeAPI([refuse, ok("coder_iter1_reply.json")]) as api:
        c = client(settings.replace(thinking=2048), api, progress=events.append)
        c.ask(coder_request())
    assert "thinking" in api.requests[0]["body"] and "thinking" not in api.requests[1]["body"]
    assert api.requests[1]["body"]["tool_choice"]["type"] == "tool"
    assert api.requests[1]["body"]["max_tokens"] == 8192
    assert any(e["phase"] == "retrying" and "thinking" in e["reason"] for e in events)


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
    assert phases[0] == "start" and phases[-1] == "result" and "done" in phases
    streamed = [e["chars"] for e in events if e["phase"] == "streaming"]
    assert len(streamed) >= 5 and streamed == sorted(streamed)
    assert all(b - a >= 256 for a, b in itertools.pairwise(streamed))
    done = next(e for e in events if e["phase"] == "done")
    assert done["usage"]["output_tokens"] == 1240


# ------------------------------------------------------------------ replies that go back


def test_malformed_tool_input_is_repaired(settings, api_key):
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
    assert [r["outcome"] for r in records] == ["invalid", "accepted"]
    assert records[0]["error"]["kind"] == "invalid" and records[1]["error"] is None
    assert records[0]["ask"] == records[1]["ask"]
    assert "missing required property" in records[1]["prompt"]["repair"]


def test_malformed_every_time_is_a_reply_error_after_the_repairs(settings, api_key):
    records = []
    script = [ok("coder_malformed_reply.json")] * 3
    with (FakeAPI(script) as api,
          pytest.raises(ReplyError, match="malformed submit_candidate reply .* 3 times") as e):
        client(settings, api, recorder=records.append).ask(coder_request())
    assert e.value.kind == "invalid" and api.count == 3
    assert [r["outcome"] for r in records] == ["invalid"] * 3


def test_semantic_check_failure_goes_back_to_the_model(settings, api_key):
    cuda = recorded("coder_iter1_reply.json")
    cuda["content"][-1]["input"]["kernels"][0]["lang"] = "cuda"   # wrong language for the CPU
    with FakeAPI([ok(cuda), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api).ask(coder_request())
    assert reply.attempts == 2
    sent = api.requests[1]["body"]["messages"][2]["content"][0]["content"]
    assert "the device needs lang 'c', not 'cuda'" in sent


def test_a_repeated_reply_goes_back_with_what_it_repeats(settings, api_key):
    records = []
    seen = {"first": True}

    def repeat(data):
        if seen.pop("first", False):
            return "this candidate is identical to candidate abc of iteration 0 (pass)"
        return None
    request = coder_request()
    request.repeat = repeat
    with FakeAPI([ok("coder_iter0_reply.json"), ok("coder_iter1_reply.json")]) as api:
        client(settings, api, recorder=records.append).ask(request)
    assert "identical to candidate abc" in \
        api.requests[1]["body"]["messages"][2]["content"][0]["content"]
    assert [r["outcome"] for r in records] == ["repeated", "accepted"]


def test_a_refusal_is_asked_again_once_with_a_note(settings, api_key):
    records = []
    with FakeAPI([ok("refusal_reply.json"), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api, recorder=records.append).ask(coder_request())
    assert reply.attempts == 2
    again = api.requests[1]["body"]["messages"]
    assert len(again) == 1 and REFUSAL_NOTE in again[0]["content"]   # the refusal is not replayed
    assert [r["outcome"] for r in records] == ["refused", "accepted"]
    assert "cyber" in records[0]["error"]["message"]


def test_two_refusals_are_a_reply_error_naming_the_category(settings, api_key):
    with (FakeAPI([ok("refusal_reply.json")] * 2) as api,
          pytest.raises(ReplyError, match=r"declined to answer twice.*cyber") as e):
        client(settings, api).ask(coder_request())
    assert e.value.kind == "refused" and api.count == 2


def test_a_truncated_reply_is_asked_again_with_twice_the_budget(settings, api_key):
    records, events = [], []
    with FakeAPI([ok("truncated_reply.json"), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api, recorder=records.append, progress=events.append).ask(
            coder_request())
    assert [r["body"]["max_tokens"] for r in api.requests] == [8192, 16384]
    assert reply.attempts == 2
    assert [r["outcome"] for r in records] == ["truncated", "accepted"]
    assert [r["prompt"]["max_tokens"] for r in records] == [8192, 16384]
    assert records[0]["usage"]["output_tokens"] == 256       # a cut reply's tokens still count
    assert any(e["phase"] == "retrying" and e.get("max_tokens") == 16384 for e in events)


def test_truncated_at_the_largest_budget_is_told_to_be_shorter_then_gives_up(settings, api_key):
    s = settings.replace(max_tokens_limit=settings.max_tokens, llm_repairs=1)
    with (FakeAPI([ok("truncated_reply.json")] * 2) as api,
          pytest.raises(ReplyError, match="cut off at max_tokens=8192") as e):
        client(s, api).ask(coder_request())
    assert e.value.kind == "truncated" and "STITCH_MAX_TOKENS_LIMIT" in e.value.hint
    assert "cut off at 8192 output tokens" in api.requests[1]["body"]["messages"][0]["content"]


def test_unparseable_tool_json_keeps_its_tokens_and_goes_back(settings, api_key):
    garbled = recorded("coder_iter1_reply.json")
    garbled["content"][-1]["_partial_json"] = '{"kernels": [}}}' + "x" * 400
    records = []
    with FakeAPI([ok(garbled), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api, recorder=records.append).ask(coder_request())
    assert reply.attempts == 2 and api.count == 2
    first = records[0]
    assert first["outcome"] == "invalid" and "unparseable" in first["error"]["message"]
    assert first["usage"]["input_tokens"] == 1650 and first["usage"]["output_tokens_estimated"]


# ------------------------------------------------------------------ the service failing


@pytest.mark.parametrize("status,kind", [(429, "rate_limit_error"), (529, "overloaded_error"),
                                         (500, "api_error")])
def test_rate_limits_overloads_and_server_errors_are_retried(settings, api_key, status, kind):
    waits, events = Waits(), []
    script = [error(status, kind, "slow down"), error(status, kind, "slow down"),
              ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        reply = client(settings, api, max_retries=2, sleep=waits,
                       progress=events.append).ask(coder_request())
    assert api.count == 3 and reply.attempts == 3
    assert waits == [0.005, 0.005]                 # retry-after-ms as the API sent it
    waiting = [e for e in events if e["phase"] == "waiting"]
    assert [(e["retry"], e["retries"], e["seconds"]) for e in waiting] == [(1, 2, 0.005),
                                                                           (2, 2, 0.005)]


def test_retry_after_in_seconds_is_honoured(settings, api_key):
    waits = Waits()
    script = [error(429, "rate_limit_error", "slow down", None, retry_after="7"),
              ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        client(settings, api, sleep=waits).ask(coder_request())
    assert waits == [7.0]


def test_without_retry_after_the_waits_back_off(settings, api_key):
    waits = Waits()
    script = [error(529, "overloaded_error", "busy", None)] * 3 + [ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        client(settings.replace(llm_backoff=1.0), api, max_retries=3, sleep=waits).ask(
            coder_request())
    assert len(waits) == 3 and api.count == 4
    for wait, base in zip(waits, (1.0, 2.0, 4.0)):
        assert 0.75 * base <= wait <= 1.25 * base


def test_a_real_wait_is_waited(settings, api_key):
    import time
    script = [error(529, "overloaded_error", "busy", retry_after_ms=300),
              ok("coder_iter1_reply.json")]
    with FakeAPI(script) as api:
        t0 = time.monotonic()
        ClaudeClient(settings.replace(base_url=api.url), max_retries=1).ask(coder_request())
        assert time.monotonic() - t0 >= 0.3


def test_an_overload_event_in_the_middle_of_a_stream_is_retried_and_recorded(settings, api_key):
    records, events, waits = [], [], Waits()
    with FakeAPI([broken("coder_iter1_reply.json", after=12), ok("coder_iter1_reply.json")]) as api:
        reply = client(settings, api, recorder=records.append, progress=events.append,
                       sleep=waits).ask(coder_request())
    assert api.count == 2 and reply.attempts == 2
    assert reply.data["kernels"][0]["name"] == "bias_gelu_scale"
    first, second = records
    assert first["outcome"] == "error" and first["error"]["kind"] == "overloaded"
    assert "in the middle of its reply" in first["error"]["message"]
    assert first["usage"]["input_tokens"] == 1650            # message_start's count is kept
    assert first["usage"]["cache_read_input_tokens"] == 4870
    assert second["outcome"] == "accepted" and first["ask"] == second["ask"]
    assert len(waits) == 1 and any(e["phase"] == "waiting" and e["reason"] == "overloaded"
                                   for e in events)


def test_a_stream_that_keeps_breaking_says_so_not_that_the_request_is_wrong(settings, api_key):
    script = [broken("coder_iter1_reply.json", after=8)] * 3
    with FakeAPI(script) as api, pytest.raises(ServiceError) as e:
        client(settings, api, max_retries=2).ask(coder_request())
    text = str(e.value)
    assert api.count == 3
    assert "overloaded" in text and "middle of its reply" in text and "2 retries" in text
    assert "bug in the request" not in text and "(200)" not in text


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


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]      # closed again: nothing listens there


def test_connection_refused_is_a_service_error(settings, api_key):
    c = ClaudeClient(settings.replace(base_url=f"http://127.0.0.1:{_closed_port()}"),
                     max_retries=0)
    with pytest.raises(ServiceError, match="cannot reach Claude"):
        c.ask(coder_request())


def test_a_password_in_the_base_url_never_reaches_an_error_or_a_record(settings, api_key):
    url = f"http://stitch:hunter2-PASSWORD@127.0.0.1:{_closed_port()}/?api_key=qwerty-KEY"
    records = []
    c = ClaudeClient(settings.replace(base_url=url), max_retries=1, sleep=Waits(),
                     recorder=records.append)
    with pytest.raises(ServiceError) as e:
        c.ask(coder_request())
    text = str(e.value) + repr(records) + c.base_url
    assert "cannot reach Claude" in str(e.value) and "[redacted]@127.0.0.1" in str(e.value)
    assert "hunter2-PASSWORD" not in text and "qwerty-KEY" not in text


def test_rejected_key_is_a_config_error(settings, api_key):
    with (FakeAPI([error(401, "authentication_error", "invalid x-api-key", None)]) as api,
          pytest.raises(ConfigError, match="rejected the API key") as e):
        client(settings, api).ask(coder_request())
    assert "ANTHROPIC_API_KEY" in str(e.value) and KEY not in str(e.value)
    assert api.count == 1                                 # never retried


def test_unknown_model_is_a_config_error_naming_the_options(settings, api_key):
    with (FakeAPI([error(404, "not_found_error", "model: claude-nope", None)]) as api,
          pytest.raises(ConfigError, match="does not know the model") as e):
        client(settings.replace(model="claude-nope"), api).ask(coder_request())
    assert "--model" in str(e.value) and api.count == 1


# ------------------------------------------------------------------ configuration


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


def test_a_local_messages_server_needs_no_key_and_takes_the_model_as_named(settings,
                                                                          no_credentials):
    served = recorded("coder_iter1_reply.json")
    served["model"] = "qwen3-coder:30b"
    with FakeAPI([ok(served)]) as api:
        c = ClaudeClient(settings.replace(base_url=api.url, model="qwen3-coder:30b",
                                          thinking=4096))
        reply = c.ask(coder_request())
    sent = api.requests[0]
    assert sent["path"] == "/v1/messages" and sent["body"]["model"] == "qwen3-coder:30b"
    assert "EMPTY" in sent["headers"].get("x-api-key", "") + sent["headers"].get("authorization", "")
    assert "thinking" not in sent["body"]         # thinking is asked of Claude models only
    assert reply.model == "qwen3-coder:30b" and c.price.input == 0.0   # local: no charge


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
    assert {"role", "task", "prompt", "reply", "model", "usage", "ask", "attempt", "outcome",
            "error", "cost_usd"} <= set(r)
    assert r["role"] == "coder" and r["task"] == "t1" and r["model"] == "claude-sonnet-5-5"
    assert r["prompt"]["user"] == "Write the candidate." and r["refs"] == ["fusion-rules"]
    assert r["reply"]["input"]["kernels"][0]["lang"] == "c"
    assert r["usage"] == {"input_tokens": 1650, "output_tokens": 1240,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4870}
    # sonnet rates: $3 in, $15 out, cache reads at a tenth of the input rate
    assert r["cost_usd"] == pytest.approx((1650 * 3 + 1240 * 15 + 4870 * 0.3) / 1e6)


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


def test_recorded_requests_are_what_was_sent(settings, api_key):
    """The records of a repaired call hold the prompt as sent, the repair message included."""
    records = []
    with FakeAPI([ok("coder_malformed_reply.json"), ok("coder_iter1_reply.json")]) as api:
        client(settings, api, recorder=records.append).ask(coder_request())
    sent = copy.deepcopy(api.requests[1]["body"]["messages"][2]["content"][0]["content"])
    assert records[1]["prompt"]["repair"] == sent
    assert records[1]["prompt"]["previous"]["input"]["kernels"][0]["lang"] == "cpp"


def test_a_prompt_over_the_context_window_stops_with_what_to_shorten(settings, api_key):
    full = recorded("truncated_reply.json")
    full["stop_reason"] = "model_context_window_exceeded"
    records = []
    with (FakeAPI([ok(full)]) as api,
          pytest.raises(ServiceError, match="exceed claude-sonnet-5-5's context window") as e):
        client(settings, api, recorder=records.append).ask(coder_request())
    assert "STITCH_RAG_TOP_K" in e.value.hint and api.count == 1
    assert records[0]["outcome"] == "too_long"


def test_a_reply_that_loads_its_kernels_in_shared_builds_passes_the_check():
    """The offline coder's programs of many kernels load them with ``runtime.load_group``
    (a hybrid session shows the model one): a reply written the same way is no unloaded kernel."""
    kernels = [{"name": n, "lang": "c", "code": f"void {n}(float* x) {{ x[0] = 1.0f; }}",
                "entry": [n]} for n in ("k0", "k1")]
    program = ("import torch.nn as nn\nfrom stitchcuda_lab import runtime\n"
               "_GROUPS = [{group}]\n"
               "_K = {{n: m for g in _GROUPS for n, m in runtime.load_group(SOURCES, g, "
               "lang='c').items()}}\n"
               "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    data = {"kernels": kernels, "replaced": [], "kept": [],
            "program": program.format(group="['k0', 'k1']")}
    assert check_candidate(data, "c") == []
    data["program"] = program.format(group="['k0']")
    assert check_candidate(data, "c") == [
        "$.program: kernel 'k1' is never loaded (runtime.load(SOURCES['k1'], lang=LANGS['k1'], "
        "name='k1'))"]
