"""Claude through the ``anthropic`` SDK: the only module of the project that imports it.

One request per ``_send``: the stable instructions and the per-problem context go in the
system prompt as two blocks marked ``cache_control`` (tools + instructions, then the problem,
are cached prefixes, so refine iterations re-send them at the cached rate); the reply streams
through ``client.messages.stream`` and progress is reported per delta; the one tool is forced
with ``tool_choice``. The SDK retries 408/409/429/5xx/529 and connection errors
(``max_retries``); what still fails becomes a ``ServiceError`` (or ``ConfigError`` for a key
or model problem) that says what to do.

The API key comes from the SDK's usual sources (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``,
a profile); this module never reads, stores or records it.

>>> ClaudeClient(Settings(), http_client=...)                           # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import anthropic

from ...errors import ConfigError, ServiceError
from ...settings import Settings
from .structured import Progress, Recorder, Request, StructuredClient, Turn

# The Claude model used when Settings.model is not a Claude model name.
DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MAX_RETRIES = 3
PROGRESS_CHARS = 256     # streamed characters between two progress reports

_CACHE = {"type": "ephemeral"}


class ClaudeClient(StructuredClient):
    """Structured calls to Claude. ``http_client`` (an SDK-compatible client) is the test seam."""

    provider = "claude"

    def __init__(self, settings: Settings, *, recorder: Recorder | None = None,
                 progress: Progress | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                 http_client: Any = None):
        model = settings.model if settings.model.startswith("claude") else DEFAULT_MODEL
        super().__init__(model=model, max_tokens=settings.max_tokens, recorder=recorder,
                         progress=progress)
        self.timeout = settings.llm_timeout
        try:
            self._client = anthropic.Anthropic(
                base_url=settings.base_url, timeout=settings.llm_timeout,
                max_retries=max_retries, http_client=http_client)
        except anthropic.AnthropicError as e:  # no key, and a profile that cannot be read
            raise _missing_key(f"; the SDK found no usable profile either ({e})") from None
        c = self._client
        if c.api_key is None and c.auth_token is None and c.credentials is None:
            raise _missing_key(" (nor ANTHROPIC_AUTH_TOKEN or an Anthropic profile)")
        self.base_url = str(c.base_url)

    def _send(self, request: Request, repair: tuple[Turn, str] | None) -> Turn:
        system = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
        if request.context:
            system.append({"type": "text", "text": request.context, "cache_control": _CACHE})
        messages: list[dict[str, Any]] = [{"role": "user", "content": request.user}]
        if repair is not None:
            messages += _repair_turns(request, *repair)
        tool = {"name": request.tool.name, "description": request.tool.description,
                "input_schema": request.tool.schema}
        self._emit(request, "start", model=self.model)
        chars = shown = 0
        try:
            with self._client.messages.stream(
                    model=self.model, max_tokens=self.max_tokens, system=system,
                    messages=messages, tools=[tool],
                    tool_choice={"type": "tool", "name": request.tool.name,
                                 "disable_parallel_tool_use": True}) as stream:
                for event in stream:
                    if event.type == "input_json":
                        chars += len(event.partial_json)
                    elif event.type == "text":
                        chars += len(event.text)
                    if chars - shown >= PROGRESS_CHARS:   # a few updates a second, not per token
                        shown = chars
                        self._emit(request, "streaming", chars=chars)
                message = stream.get_final_message()
        except anthropic.APIError as e:
            raise self._service_error(e) from None
        except ValueError as e:  # the SDK could not parse streamed tool JSON at all
            return Turn(tool_input=None, model=self.model, stop_reason="tool_use",
                        detail=f"unparseable tool input: {str(e)[:300]}")
        turn = _turn(message)
        self._emit(request, "done", chars=chars, usage=turn.usage, stop_reason=turn.stop_reason)
        return turn

    def _service_error(self, e: anthropic.APIError) -> Exception:
        what = f"Claude ({self.model} at {self.base_url})"
        detail = getattr(e, "api_message", None) or e.message
        retries = self._client.max_retries
        if isinstance(e, anthropic.APITimeoutError):
            return ServiceError(f"{what} did not answer within {self.timeout:g} s "
                                f"({retries} retries)",
                                hint="raise STITCH_LLM_TIMEOUT or try again later")
        if isinstance(e, anthropic.APIConnectionError):
            return ServiceError(f"cannot reach {what}: {e.__cause__ or e.message}",
                                hint="check the network, a proxy, or STITCH_BASE_URL")
        if isinstance(e, anthropic.AuthenticationError):
            return ConfigError(f"{what} rejected the API key (401): {detail}",
                               hint="check ANTHROPIC_API_KEY")
        if isinstance(e, anthropic.PermissionDeniedError):
            return ConfigError(f"{what} refused access (403): {detail}",
                               hint="check the key's workspace and model access")
        if isinstance(e, anthropic.NotFoundError):
            return ConfigError(f"{what} does not know the model or endpoint (404): {detail}",
                               hint="set STITCH_MODEL to an available Claude model")
        if isinstance(e, anthropic.RateLimitError):
            return ServiceError(f"{what} is rate limiting this key (429) and {retries} retries "
                                f"did not get through: {detail}",
                                hint="wait a minute and run the step again")
        if isinstance(e, anthropic.OverloadedError):
            return ServiceError(f"{what} is overloaded (529) and {retries} retries did not get "
                                f"through: {detail}",
                                hint="try again in a few minutes")
        if isinstance(e, anthropic.APIStatusError):
            if e.status_code >= 500:
                return ServiceError(f"{what} failed with a server error ({e.status_code}) after "
                                    f"{retries} retries: {detail}", hint="try again later")
            return ServiceError(f"{what} rejected the request ({e.status_code}): {detail}",
                                hint="this is a bug in the request; report it with the session")
        return ServiceError(f"{what} failed: {e.message}")


def _missing_key(detail: str) -> ConfigError:
    return ConfigError(f"no Anthropic API key: ANTHROPIC_API_KEY is not set{detail}",
                       hint="export ANTHROPIC_API_KEY=... in the shell that starts Jupyter or "
                            "the CLI, or use --agent offline")


def _repair_turns(request: Request, turn: Turn, message: str) -> list[dict[str, Any]]:
    if not turn.call_id:
        return [{"role": "assistant", "content": turn.text or "(no tool call)"},
                {"role": "user", "content": message}]
    tool_input = turn.tool_input if isinstance(turn.tool_input, dict) else {}
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": turn.call_id,
                                           "name": request.tool.name, "input": tool_input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": turn.call_id,
                                      "is_error": True, "content": message}]},
    ]


def _turn(message: Any) -> Turn:
    tool_input, call_id, texts = None, "", []
    for block in message.content:
        if block.type == "tool_use" and tool_input is None:
            tool_input, call_id = block.input, block.id
        elif block.type == "text":
            texts.append(block.text)
    detail = ""
    if message.stop_reason == "refusal" and message.stop_details is not None:
        d = message.stop_details
        detail = ", ".join(x for x in (d.category, d.explanation) if x)
    u = message.usage
    usage = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
             "cache_creation_input_tokens": u.cache_creation_input_tokens or 0,
             "cache_read_input_tokens": u.cache_read_input_tokens or 0}
    return Turn(tool_input=tool_input, text="".join(texts), model=message.model, usage=usage,
                stop_reason=message.stop_reason or "", detail=detail, call_id=call_id)
