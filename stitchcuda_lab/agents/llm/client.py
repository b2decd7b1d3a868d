"""Claude through the ``anthropic`` SDK: the only module of the project that imports it.

One request per ``_send``: the stable instructions and the per-problem context go in the
system prompt as two blocks marked ``cache_control`` (tools + instructions, then the problem,
are cached prefixes, so refine iterations re-send them at the cached rate); the reply streams
through ``client.messages.stream`` and progress is reported per delta. The one tool is forced
with ``tool_choice``; with thinking on (``Settings.thinking`` tokens, Claude models only) the
model thinks first, which the API allows only with ``tool_choice: auto``, so the tool is then
offered and the prompt asks for it (a reply without it goes back as a repair). A server that
rejects the thinking parameter gets the request again without it.

The SDK's own retries are off: ``structured.StructuredClient.ask`` retries, so that an error
event inside a stream that began with HTTP 200 (``overloaded_error`` mid-reply) is retried like
a 529, waits honour ``retry-after`` and show as progress, and every try is recorded. Errors
map onto the project's through one table (``_STATUS``).

The same client talks to any server that speaks the Messages API (vLLM, Ollama, llama.cpp):
``Settings.base_url`` and ``Settings.model``; such a server gets the placeholder key ``EMPTY``
when no key is set. The API key comes from the SDK's usual sources (``ANTHROPIC_API_KEY``,
``ANTHROPIC_AUTH_TOKEN``, a profile); this module never reads, stores or records it.

>>> ClaudeClient(Settings(), http_client=...)                           # doctest: +SKIP
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import anthropic

from ...errors import ConfigError, ServiceError
from ...redact import redact_urls
from ...settings import Settings
from .pricing import price_for
from .structured import Progress, Recorder, Repair, Request, StructuredClient, Transient, Turn

# The Claude model used when Settings.model is not a Claude model name (and no server is set).
DEFAULT_MODEL = "claude-sonnet-5-5"
PROGRESS_CHARS = 256     # streamed characters between two progress reports
MIN_THINKING = 1024      # the API's smallest thinking budget

_CACHE = {"type": "ephemeral"}

# API error type -> (transient kind or None for fatal, what it means)
_TRANSIENT_TYPES = {"overloaded_error": "overloaded", "rate_limit_error": "rate_limited",
                    "api_error": "server", "timeout_error": "timeout"}


class ClaudeClient(StructuredClient):
    """Structured calls to Claude. ``http_client`` (an SDK-compatible client) is the test seam."""

    provider = "claude"

    def __init__(self, settings: Settings, *, recorder: Recorder | None = None,
                 progress: Progress | None = None, max_retries: int | None = None,
                 http_client: Any = None, sleep: Any = time.sleep):
        local = bool(settings.base_url)
        model = settings.model if (settings.model.startswith("claude") or local) \
            else DEFAULT_MODEL
        super().__init__(
            model=model, max_tokens=settings.max_tokens, recorder=recorder, progress=progress,
            max_tokens_limit=settings.max_tokens_limit,
            retries=settings.llm_retries if max_retries is None else max_retries,
            backoff=settings.llm_backoff, repairs=settings.llm_repairs, sleep=sleep,
            price=price_for(model, base_url=settings.base_url, override=settings.price))
        self.timeout = settings.llm_timeout
        self.thinking = settings.thinking if model.startswith("claude") else 0
        if self.thinking:
            self.thinking = max(self.thinking, MIN_THINKING)
        kw = {"base_url": settings.base_url, "timeout": settings.llm_timeout,
              "max_retries": 0, "http_client": http_client}
        try:
            self._client = anthropic.Anthropic(**kw)
        except anthropic.AnthropicError as e:  # no key, and a profile that cannot be read
            if not local:
                raise _missing_key(f"; the SDK found no usable profile either ({e})") from None
            self._client = anthropic.Anthropic(api_key="EMPTY", **kw)
        c = self._client
        if c.api_key is None and c.auth_token is None and c.credentials is None:
            if not local:
                raise _missing_key(" (nor ANTHROPIC_AUTH_TOKEN or an Anthropic profile)")
            self._client = c = anthropic.Anthropic(api_key="EMPTY", **kw)
        self.base_url = redact_urls(str(c.base_url))

    # ------------------------------------------------------------------ one request
    def _send(self, request: Request, repair: Repair | None, max_tokens: int) -> Turn:
        # plain JSON, as the session log records it, not the SDK's TypedDicts
        system: list[dict[str, Any]] = [{"type": "text", "text": request.system,
                                         "cache_control": _CACHE}]
        if request.context:
            system.append({"type": "text", "text": request.context, "cache_control": _CACHE})
        messages = _messages(request, repair)
        tool: dict[str, Any] = {"name": request.tool.name,
                                "description": request.tool.description,
                                "input_schema": request.tool.schema}
        choice: dict[str, Any] = {"type": "tool", "name": request.tool.name,
                                  "disable_parallel_tool_use": True}
        extra: dict[str, Any] = {}
        if self.thinking:
            choice = {"type": "auto", "disable_parallel_tool_use": True}
            extra["thinking"] = {"type": "enabled", "budget_tokens": self.thinking}
            max_tokens += self.thinking
        extra.update(system=system, messages=messages, tools=[tool], tool_choice=choice)
        self._emit(request, "start", model=self.model, max_tokens=max_tokens)
        chars = shown = 0
        stream = None
        try:
            with self._client.messages.stream(
                    model=self.model, max_tokens=max_tokens, **extra) as stream:
                for event in stream:
                    if event.type == "input_json":
                        chars += len(event.partial_json)
                    elif event.type in ("text", "thinking"):
                        chars += len(getattr(event, event.type))
                    if chars - shown >= PROGRESS_CHARS:   # a few updates a second, not per token
                        shown = chars
                        self._emit(request, "streaming", chars=chars)
                message = stream.get_final_message()
        except anthropic.APIError as e:
            if self.thinking and _rejects_thinking(e):
                self.thinking = 0        # this server or model takes no thinking parameter
                self._emit(request, "retrying", reason="thinking not supported")
                return self._send(request, repair, max_tokens - extra["thinking"]["budget_tokens"])
            raise self._error(e, _snapshot_usage(stream), chars) from None
        except ValueError as e:  # the SDK could not parse streamed tool JSON at all
            usage = _snapshot_usage(stream)
            usage["output_tokens"] = max(usage.get("output_tokens", 0), chars // 4)
            usage["output_tokens_estimated"] = True
            return Turn(tool_input=None, model=self.model, usage=usage, stop_reason="tool_use",
                        detail=f"unparseable tool input: {str(e)[:300]}")
        turn = _turn(message)
        self._emit(request, "done", chars=chars, usage=turn.usage, stop_reason=turn.stop_reason)
        return turn

    # ------------------------------------------------------------------ errors
    def _error(self, e: anthropic.APIError, usage: dict[str, Any], chars: int) -> Exception:
        """The project's exception for an SDK error: ``Transient`` when asking again may help."""
        what = f"Claude ({self.model} at {self.base_url})"
        detail = redact_urls(str(getattr(e, "api_message", None) or e.message))
        if isinstance(e, anthropic.APITimeoutError):
            return Transient(f"{what} did not answer within {self.timeout:g} s", kind="timeout",
                             hint="raise STITCH_LLM_TIMEOUT or try again later", usage=usage)
        if isinstance(e, anthropic.APIConnectionError):
            cause = redact_urls(str(e.__cause__ or e.message))
            return Transient(f"cannot reach {what}: {cause}", kind="network", usage=usage,
                             hint="check the network, a proxy, or STITCH_BASE_URL")
        if not isinstance(e, anthropic.APIStatusError):
            return ServiceError(f"{what} failed: {detail}")
        status = e.status_code
        etype = _error_type(e.body)
        in_stream = status == 200        # an error event after the stream began
        where = f" in the middle of its reply ({chars} characters streamed)" if in_stream else ""
        kind = _TRANSIENT_TYPES.get(etype) or {429: "rate_limited", 529: "overloaded",
                                               408: "timeout", 409: "server"}.get(status)
        if kind is None and status >= 500:
            kind = "server"
        if kind is not None:
            code = f"{status}" if not in_stream else f"{etype} event"
            says = {"overloaded": "is overloaded", "rate_limited": "is rate limiting this key",
                    "timeout": "timed out", "server": "failed with a server error"}[kind]
            return Transient(f"{what} {says} ({code}){where}: {detail}", kind=kind,
                             retry_after=_retry_after(e.response), usage=usage,
                             hint={"rate_limited": "wait a minute and run the step again"}.get(
                                 kind, "try again in a few minutes"))
        if status == 401 or isinstance(e, anthropic.AuthenticationError):
            return ConfigError(f"{what} rejected the API key (401): {detail}",
                               hint="check ANTHROPIC_API_KEY")
        if status == 403 or isinstance(e, anthropic.PermissionDeniedError):
            return ConfigError(f"{what} refused access (403): {detail}",
                               hint="check the key's workspace and model access")
        if status == 404 or isinstance(e, anthropic.NotFoundError):
            return ConfigError(f"{what} does not know the model or endpoint (404): {detail}",
                               hint="set STITCH_MODEL (--model) to a model the server serves, "
                                    "and STITCH_BASE_URL (--base-url) to its root URL")
        if status == 413:
            return ServiceError(f"{what} refused a request that is too large (413): {detail}",
                                hint="lower STITCH_RAG_TOP_K or STITCH_MEMORY_TOKENS")
        if in_stream:
            return ServiceError(f"{what} sent an error event ({etype or 'unknown'}){where}: "
                                f"{detail}", hint="try again; report it with the session if "
                                                  "it repeats")
        return ServiceError(f"{what} rejected the request ({status}): {detail}",
                            hint="this is a bug in the request; report it with the session")


def _missing_key(detail: str) -> ConfigError:
    return ConfigError(f"no Anthropic API key: ANTHROPIC_API_KEY is not set{detail}",
                       hint="export ANTHROPIC_API_KEY=... in the shell that starts Jupyter or "
                            "the CLI, or use --agent offline")


def _error_type(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("type") or "")
    return ""


def _rejects_thinking(e: anthropic.APIError) -> bool:
    return (isinstance(e, anthropic.APIStatusError) and e.status_code == 400
            and "thinking" in str(getattr(e, "api_message", None) or e.message).lower())


def _retry_after(response: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    headers = getattr(response, "headers", None) or {}
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when is not None else None


def _snapshot_usage(stream: Any) -> dict[str, Any]:
    """The usage a broken stream reported before it broke (message_start's input counts)."""
    try:
        return _usage(stream.current_message_snapshot.usage) if stream is not None else {}
    except (AssertionError, AttributeError):
        return {}


def _usage(u: Any) -> dict[str, Any]:
    return {"input_tokens": u.input_tokens or 0, "output_tokens": u.output_tokens or 0,
            "cache_creation_input_tokens": u.cache_creation_input_tokens or 0,
            "cache_read_input_tokens": u.cache_read_input_tokens or 0}


def _messages(request: Request, repair: Repair | None) -> list[dict[str, Any]]:
    if repair is None:
        return [{"role": "user", "content": request.user}]
    if repair.turn is None:                # a fresh try with a note for the model
        return [{"role": "user", "content": f"{request.user}\n\n{repair.message}"}]
    turn = repair.turn
    first = {"role": "user", "content": request.user}
    if not turn.call_id:
        # the model answered without the tool: its own blocks (thinking first), then the message
        content = turn.content or [{"type": "text", "text": turn.text or "(no tool call)"}]
        return [first, {"role": "assistant", "content": content},
                {"role": "user", "content": repair.message}]
    content = [b for b in turn.content if b.get("type") in ("thinking", "redacted_thinking")]
    tool_input = turn.tool_input if isinstance(turn.tool_input, dict) else {}
    content.append({"type": "tool_use", "id": turn.call_id, "name": request.tool.name,
                    "input": tool_input})
    return [first, {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": turn.call_id,
                                          "is_error": True, "content": repair.message}]}]


def _turn(message: Any) -> Turn:
    tool_input, call_id, texts, thoughts, content = None, "", [], [], []
    for block in message.content:
        if block.type == "tool_use" and tool_input is None:
            tool_input, call_id = block.input, block.id
        elif block.type == "text":
            texts.append(block.text)
            content.append({"type": "text", "text": block.text})
        elif block.type == "thinking":
            thoughts.append(block.thinking)
            content.append({"type": "thinking", "thinking": block.thinking,
                            "signature": block.signature})
        elif block.type == "redacted_thinking":
            content.append({"type": "redacted_thinking", "data": block.data})
    detail = ""
    if message.stop_reason == "refusal" and message.stop_details is not None:
        d = message.stop_details
        detail = ", ".join(x for x in (d.category, d.explanation) if x)
    return Turn(tool_input=tool_input, text="".join(texts), model=message.model,
                usage=_usage(message.usage), stop_reason=message.stop_reason or "",
                detail=detail, call_id=call_id, thinking="\n".join(thoughts), content=content)
