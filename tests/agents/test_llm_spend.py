"""Prices per model and the sums of a session's spend."""

from __future__ import annotations

import pytest

from stitchcuda_lab.agents.llm.pricing import is_local, parse_price, price_for
from stitchcuda_lab.errors import ConfigError
from stitchcuda_lab.spend import Spend, Usage

USAGE = {"input_tokens": 1_000_000, "output_tokens": 1_000_000,
         "cache_creation_input_tokens": 1_000_000, "cache_read_input_tokens": 1_000_000}


@pytest.mark.parametrize("model,total", [
    ("claude-sonnet-4-5", 3 + 15 + 3.75 + 0.3),
    ("claude-sonnet-5-5", 3 + 15 + 3.75 + 0.3),
    ("claude-opus-4-1", 15 + 75 + 18.75 + 1.5),
    ("claude-opus-4-5", 5 + 25 + 6.25 + 0.5),
    ("claude-haiku-4-5", 1 + 5 + 1.25 + 0.1),
])
def test_published_family_rates_price_every_kind_of_token(model, total):
    assert price_for(model).cost(USAGE) == pytest.approx(total)


def test_unknown_models_are_unpriced_unless_served_here_or_given_a_price():
    assert price_for("my-model") is None
    assert price_for("my-model", base_url="https://api.example.com/v1") is None
    assert price_for("qwen3-coder", base_url="http://localhost:11434").cost(USAGE) == 0.0
    assert price_for("qwen3-coder", base_url="http://127.0.0.1:8000/v1").input == 0.0
    # a Claude name is Claude wherever it is reached (a local proxy still bills)
    assert price_for("claude-sonnet-4-5", base_url="http://127.0.0.1:9").input == 3.0
    assert price_for("claude-unknown", base_url="http://127.0.0.1:9") is None
    p = price_for("my-model", override="2,8")
    assert (p.input, p.output, p.cache_write, p.cache_read) == (2, 8, 2.5, pytest.approx(0.2))


@pytest.mark.parametrize("text", ["3", "a,b", "1,2,3", "-1,2"])
def test_a_bad_price_names_the_setting(text):
    with pytest.raises(ConfigError, match="STITCH_PRICE"):
        parse_price(text)


def test_local_means_this_machine():
    assert is_local("http://localhost:8080") and is_local("http://[::1]:8000/v1")
    assert not is_local("http://10.0.0.5:8000") and not is_local("https://api.anthropic.com")


def test_spend_sums_per_iteration_and_role_and_keeps_unpriced_apart():
    s = Spend.from_exchanges([
        {"role": "planner", "iteration": None, "cost_usd": 0.01,
         "usage": {"input_tokens": 500, "cache_creation_input_tokens": 2000,
                   "output_tokens": 100}},
        {"role": "coder", "iteration": 0, "cost_usd": 0.02,
         "usage": {"input_tokens": 300, "cache_read_input_tokens": 2000, "output_tokens": 900}},
        {"role": "coder", "iteration": 0, "cost_usd": None,
         "usage": {"input_tokens": 300, "output_tokens": 1}}])
    assert s.total.total_tokens == 500 + 2000 + 100 + 300 + 2000 + 900 + 300 + 1
    assert s.total.cost_usd == pytest.approx(0.03) and s.total.unpriced == 1
    assert set(s.by_iteration) == {"plan", "0"} and s.by_iteration["0"].exchanges == 2
    assert s.by_role["planner"].cache_write_tokens == 2000
    assert s.to_dict()["by_role"]["coder"]["cache_read_tokens"] == 2000
    assert s.total.line().endswith("$0.0300 (+1 unpriced)")


def test_an_unpriced_session_says_so():
    u = Usage()
    u.add({"usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": None})
    assert u.line() == "15 tokens (10 in, 0 cached, 5 out), cost unknown (unpriced model)"
