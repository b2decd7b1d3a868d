"""A second provider: any OpenAI-compatible chat server (OpenAI, a local vLLM, Ollama, ...).

Same structured-output contract as Claude, through one forced function tool. Settings.base_url
points at the server (``http://127.0.0.1:8000/v1`` for vLLM); Settings.model names the served
model. The reply streams (``stream_options.include_usage`` for the token counts; a server that
rejects the option is asked again without it), progress is reported per delta, and reasoning
text (``reasoning_content`` / ``reasoning``) is kept. Reasoning models (OpenAI's o-series and
gpt-5) take ``max_completion_tokens`` and no temperature; a server that says so for another
model gets the request again in that form. The key comes from ``OPENAI_API_KEY`` (the SDK's
usual source); a server at a custom base URL that needs no key gets the placeholder ``EMPTY``,
as vLLM expects. The SDK's retries are off: ``StructuredClient.ask`` retries and records.
"""

from __future__ import annotations

import re
import time
from typing import Any

import openai

from ...errors import ConfigError, ServiceError
from ...redact import redact_urls
from ...settings import Settings
from .pricing import price_for
from .structured import (
    Progress,
    Recorder,
    Repair,
    Request,
    StructuredClient,
    Transient,
    Turn,
    parse_arguments,
)

PROGRESS_CHARS = 256
# Models that take max_completion_tokens and only the default temperature.
REASONING_MODELS = re.compile(r"(^|/)(o\d|gpt-5)", re.I)
_STOPS = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end_turn",
          "length": "max_tokens", "content_filter": "refusal"}


class OpenAIClient(StructuredClient):
    provider = "openai"

    def __init__(self, settings: Settings, *, recorder: Recorder | None = None,
                 progress: Progress | None = None, max_retries: int | None = None,
                 http_client: Any = None, sleep: Any = time.sleep):
        if settings.model.startswith("claude"):
            raise ConfigError(f"the openai agent cannot use the Claude model {settings.model!r}",
                              hint="set STITCH_MODEL (--model) to the model the server serves")
        super().__init__(
            model=settings.model, max_tokens=settings.max_tokens, recorder=recorder,
            progress=progress, max_tokens_limit=settings.max_tokens_limit,
            retries=settings.llm_retries if max_retries is None else max_retries,
            backoff=settings.llm_backoff, repairs=settings.llm_repairs, sleep=sleep,
            price=price_for(settings.model, base_url=settings.base_url,
                            override=settings.price))
        self.temperature = settings.temperature
        self.timeout = settings.llm_timeout
        self.reasoning = bool(REASONING_MODELS.search(settings.model))
        self.usage_option = True
        kw = {"base_url": settings.base_url, "timeout": settings.llm_timeout,
              "max_retries": 0, "http_client": http_client}
        try:
            self._client = openai.OpenAI(**kw)
        except openai.OpenAIError:
            if not settings.base_url:
                raise ConfigError("no OpenAI API key: OPENAI_API_KEY is not set",
                                  hint="export OPENAI_API_KEY=..., or point STITCH_BASE_URL "
                                       "(--base-url) at an OpenAI-compatible server") from None
            self._client = openai.OpenAI(api_key="EMPTY", **kw)
        self.base_url = redact_urls(str(self._client.base_url))

    def _send(self, request: Request, repair: Repair | None, max_tokens: int) -> Turn:
        params: dict[str, Any] = {
            "model": self.model, "messages": _messages(request, repair), "stream": True,
            "tools": [{"type": "function", "function": {
                "name": request.tool.name, "description": request.tool.description,
                "parameters": request.tool.schema}}],
            "tool_choice": {"type": "function", "function": {"name": request.tool.name}}}
        if self.usage_option:
            params["stream_options"] = {"include_usage": True}
        if self.reasoning:
            params["max_completion_tokens"] = max_tokens
        else:
            params["max_tokens"] = max_tokens
            params["temperature"] = self.temperature
        self._emit(request, "start", model=self.model, max_tokens=max_tokens)
        acc = _Accumulator()
        try:
            for chunk in self._client.chat.completions.create(**params):
                if acc.add(chunk):
                    self._emit(request, "streaming", chars=acc.chars)
        except openai.BadRequestError as e:
            adapted = self._adapt(e)
            if adapted:
                self._emit(request, "retrying", reason=adapted)
                return self._send(request, repair, max_tokens)
            raise self._error(e, acc) from None
        except openai.APIError as e:
            raise self._error(e, acc) from None
        turn = acc.turn(self.model)
        self._emit(request, "done", chars=acc.chars, usage=turn.usage,
                   stop_reason=turn.stop_reason)
        return turn

    def _adapt(self, e: openai.BadRequestError) -> str:
        """Change the request form when a 400 says which parameter the server refuses."""
        text = str(getattr(e, "message", "") or e).lower()
        if self.usage_option and "stream_options" in text:
            self.usage_option = False
            return "stream_options not supported"
        if not self.reasoning and ("max_completion_tokens" in text or (
                "temperature" in text and "support" in text)):
            self.reasoning = True
            return "reasoning model: max_completion_tokens, default temperature"
        return ""

    def _error(self, e: Exception, acc: _Accumulator) -> Exception:
        what = f"the OpenAI-compatible server ({self.model} at {self.base_url})"
        usage = acc.usage_dict()
        if isinstance(e, openai.APITimeoutError):
            return Transient(f"{what} did not answer within {self.timeout:g} s", kind="timeout",
                             hint="raise STITCH_LLM_TIMEOUT or try again later", usage=usage)
        if isinstance(e, openai.APIConnectionError):
            return Transient(f"cannot reach {what}", kind="network", usage=usage,
                             hint="check that the server runs and STITCH_BASE_URL (--base-url)")
        status = getattr(e, "status_code", None)
        detail = redact_urls(str(getattr(e, "message", "") or e))
        if status == 401:
            return ConfigError(f"{what} rejected the API key (401)", hint="check OPENAI_API_KEY")
        if status == 404:
            return ConfigError(f"{what} does not serve that model (404)",
                               hint="set STITCH_MODEL (--model) to a served model name")
        if status == 429:
            return Transient(f"{what} is rate limiting (429)", kind="rate_limited", usage=usage,
                             retry_after=_retry_after(getattr(e, "response", None)),
                             hint="wait and run the step again")
        if status is None or status >= 500:
            return Transient(f"{what} failed ({status or 'error in the stream'}): {detail}",
                             kind="server", usage=usage, partial=acc.text,
                             retry_after=_retry_after(getattr(e, "response", None)),
                             hint="try again later")
        return ServiceError(f"{what} rejected the request ({status}): {detail}")


class _Accumulator:
    """Chunks of a streamed chat completion, put back together."""

    def __init__(self) -> None:
        self.model = ""
        self.text = self.reasoning = self.refusal = ""
        self.calls: dict[int, dict[str, str]] = {}
        self.finish = ""
        self.usage: Any = None
        self.chars = self._shown = 0

    def add(self, chunk: Any) -> bool:
        """Take one chunk; True when enough arrived for a progress report."""
        self.model = chunk.model or self.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in chunk.choices or []:
            d = choice.delta
            if d is not None:
                self.text += d.content or ""
                self.refusal += getattr(d, "refusal", None) or ""
                extra = getattr(d, "model_extra", None) or {}
                thought = extra.get("reasoning_content") or extra.get("reasoning") or ""
                self.reasoning += thought
                self.chars += len(d.content or "") + len(thought)
                for tc in d.tool_calls or []:
                    call = self.calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                    call["id"] = tc.id or call["id"]
                    if tc.function is not None:
                        call["name"] = tc.function.name or call["name"]
                        call["args"] += tc.function.arguments or ""
                        self.chars += len(tc.function.arguments or "")
            if choice.finish_reason:
                self.finish = choice.finish_reason
        if self.chars - self._shown >= PROGRESS_CHARS:
            self._shown = self.chars
            return True
        return False

    def usage_dict(self) -> dict[str, Any]:
        u = self.usage
        if u is None:
            return {}
        details = getattr(u, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        return {"input_tokens": (u.prompt_tokens or 0) - cached,
                "output_tokens": u.completion_tokens or 0,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}

    def turn(self, model: str) -> Turn:
        common: dict[str, Any] = {"text": self.text, "model": self.model or model, "usage": self.usage_dict(),
                  "thinking": self.reasoning}
        if self.refusal:
            return Turn(tool_input=None, stop_reason="refusal", detail=self.refusal, **common)
        stop = _STOPS.get(self.finish, self.finish)
        if not self.calls:
            return Turn(tool_input=None, stop_reason=stop, **common)
        call = self.calls[min(self.calls)]
        value, error = parse_arguments(call["args"])
        return Turn(tool_input=value, stop_reason=stop, detail=error, call_id=call["id"],
                    raw=call["args"], **common)


def _messages(request: Request, repair: Repair | None) -> list[dict[str, Any]]:
    system = request.system + ("\n\n" + request.context if request.context else "")
    user = request.user
    if repair is not None and repair.turn is None:
        user = f"{user}\n\n{repair.message}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": user}]
    if repair is None or repair.turn is None:
        return messages
    turn = repair.turn
    if turn.call_id:
        return messages + [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": turn.call_id, "type": "function",
                "function": {"name": request.tool.name, "arguments": turn.raw or "{}"}}]},
            {"role": "tool", "tool_call_id": turn.call_id, "content": repair.message}]
    return messages + [{"role": "assistant", "content": turn.text or "(no tool call)"},
                       {"role": "user", "content": repair.message}]


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float(headers[name]) / scale
        except (KeyError, TypeError, ValueError):
            continue
    return None
