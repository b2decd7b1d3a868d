"""Credentials in URLs are redacted wherever they are written, and the LLM configuration never
reaches the environment of the Verifier's processes."""

from __future__ import annotations

import json

import pytest

from stitchcuda_lab.redact import has_credentials, redact_urls
from stitchcuda_lab.settings import LLM_ENV, Settings
from stitchcuda_lab.store import SessionStore
from stitchcuda_lab.verifier.worker import clean_env

URL = "https://stitch:hunter2-PW@llm.example.com:8443/v1?api_key=qwerty-KEY&model=m"


@pytest.mark.parametrize("text,want", [
    ("http://bob:pw@127.0.0.1:8000/v1", "http://[redacted]@127.0.0.1:8000/v1"),
    ("https://token123@github.com/x", "https://[redacted]@github.com/x"),
    ("see http://h/v1?token=abc&x=1 and", "see http://h/v1?token=[redacted]&x=1 and"),
    ("http://h/v1?x=1&Signature=s3&key=k", "http://h/v1?x=1&Signature=[redacted]&key=[redacted]"),
    ("http://127.0.0.1:8000/v1 has nothing to hide", "http://127.0.0.1:8000/v1 has nothing to hide"),
    ("mail bob@example.com", "mail bob@example.com"),
])
def test_urls_lose_their_credentials_and_nothing_else(text, want):
    assert redact_urls(text) == want
    assert redact_urls(text.encode()) == want.encode()
    assert has_credentials(text) == (text != want)


def test_a_url_inside_json_is_redacted_too():
    line = json.dumps({"message": f"cannot reach {URL}"})
    out = redact_urls(line)
    assert "hunter2-PW" not in out and "qwerty-KEY" not in out and json.loads(out)


def test_the_worker_environment_has_no_llm_configuration():
    base = {"PATH": "/bin", "STITCH_TRIALS": "5", "STITCH_BASE_URL": "http://127.0.0.1:8000",
            "STITCH_MODEL": "qwen", "STITCH_MAX_COST": "2", "STITCH_PRICE": "3,15",
            "STITCH_AGENT": "claude", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
            "ANTHROPIC_BASE_URL": "http://x", "HTTPS_PROXY": "http://u:p4ss@proxy:3128",
            "NO_PROXY": "localhost", "ANTHROPIC_API_KEY": "sk-ant-x", "GITHUB_TOKEN": "t"}
    env = clean_env(base)
    assert env == {"PATH": "/bin", "STITCH_TRIALS": "5", "NO_PROXY": "localhost"}


def test_every_llm_setting_is_on_the_list_the_worker_strips():
    llm = {"model", "max_tokens", "max_tokens_limit", "thinking", "temperature", "base_url",
           "llm_timeout", "llm_retries", "llm_backoff", "llm_repairs", "candidates",
           "memory_tokens", "max_cost", "max_total_tokens", "price", "rag_top_k", "judge"}
    assert {f"STITCH_{n.upper()}" for n in llm} <= set(LLM_ENV)
    assert all(hasattr(Settings(), n) for n in llm)


def test_the_session_log_never_holds_a_password_from_a_url(tmp_path):
    log = SessionStore(tmp_path, secrets=[]).create({"problem": "p"})
    log.append("error", {"type": "ServiceError", "message": f"cannot reach Claude at {URL}"})
    log.append("note", {"long": "x" * 300 + URL})        # long values go to artifacts
    log.update_meta(paused=f"error: {URL}")
    written = b"".join(p.read_bytes() for p in log.dir.rglob("*") if p.is_file())
    assert b"hunter2-PW" not in written and b"qwerty-KEY" not in written
    assert b"[redacted]@llm.example.com" in written
