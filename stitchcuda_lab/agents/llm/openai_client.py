"""A second provider: any OpenAI-compatible chat server (OpenAI, a local vLLM, ...).

Same structured-output contract as Claude, through one forced function tool. Settings.base_url
points at the server (``http://127.0.0.1:8000/v1`` for vLLM); Settings.model names the served
model. The key comes from ``OPENAI_API_KEY`` (the SDK's usual source); a server at a custom
base URL that needs no key gets the placeholder ``EMPTY``, as vLLM expects.
"""

from __future__ import annotations

from typing import Any

import openai

from ...errors import ConfigError, ServiceError
from ...settings import Settings
from .structured import Progress, Recorder, Request, StructuredClient, Turn, parse_arguments

DEFAULT_MAX_RETRIES = 3


class OpenAIClient(StructuredClient):
    provider = "openai"

    def __init__(self, settings: Settings, *, recorder: Recorder | None = None,
                 progress: Progress | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                 http_client: Any = None):
        if settings.model.startswith("claude"):
            raise ConfigError(f"the openai agent cannot use the Claude model {settings.model!r}",
                              hint="set STITCH_MODEL to the model the server serves")
        super().__init__(model=settings.model, max_tokens=settings.max_tokens,
                         recorder=recorder, progress=progress)
        self.temperature = settings.temperature
        self.timeout = settings.llm_timeout
        kw = {"base_url": settings.base_url, "timeout": settings.llm_timeout,
              "max_retries": max_retries, "http_client": http_client}
        try:
            self._client = openai.OpenAI(**kw)
        except openai.OpenAIError:
            if not settings.base_url:
                raise ConfigError("no OpenAI API key: OPENAI_API_KEY is not set",
                                  hint="export OPENAI_API_KEY=..., or point STITCH_BASE_URL at "
                                       "an OpenAI-compatible server") from None
            self._client = openai.OpenAI(api_key="EMPTY", **kw)
        self.base_url = str(self._client.base_url)

    def _send(self, request: Request, repair: tuple[Turn, str] | None) -> Turn:
        system = request.system + ("\n\n" + request.context if request.context else "")
        messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                          {"role": "user", "content": request.user}]
        if repair is not None:
            turn, message = repair
            if turn.call_id:
                messages += [
                    {"role": "assistant", "content": None, "tool_calls": [{
                        "id": turn.call_id, "type": "function",
                        "function": {"name": request.tool.name,
                                     "arguments": turn.raw or "{}"}}]},
                    {"role": "tool", "tool_call_id": turn.call_id, "content": message}]
            else:
                messages += [{"role": "assistant", "content": turn.text or "(no tool call)"},
                             {"role": "user", "content": message}]
        self._emit(request, "start", model=self.model)
        try:
            r = self._client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=self.max_tokens,
                temperature=self.temperature,
                tools=[{"type": "function", "function": {
                    "name": request.tool.name, "description": request.tool.description,
                    "parameters": request.tool.schema}}],
                tool_choice={"type": "function", "function": {"name": request.tool.name}})
        except openai.APIError as e:
            raise self._service_error(e) from None
        turn = _turn(r, self.model)
        self._emit(request, "done", usage=turn.usage, stop_reason=turn.stop_reason)
        return turn

    def _service_error(self, e: Exception) -> Exception:
        what = f"the OpenAI-compatible server ({self.model} at {self.base_url})"
        if isinstance(e, openai.APITimeoutError):
            return ServiceError(f"{what} did not answer within {self.timeout:g} s",
                                hint="raise STITCH_LLM_TIMEOUT or try again later")
        if isinstance(e, openai.APIConnectionError):
            return ServiceError(f"cannot reach {what}",
                                hint="check that the server runs and STITCH_BASE_URL")
        if isinstance(e, openai.AuthenticationError):
            return ConfigError(f"{what} rejected the API key (401)",
                               hint="check OPENAI_API_KEY")
        if isinstance(e, openai.NotFoundError):
            return ConfigError(f"{what} does not serve that model (404)",
                               hint="set STITCH_MODEL to a served model name")
        if isinstance(e, openai.RateLimitError):
            return ServiceError(f"{what} is rate limiting (429) and retries did not get through",
                                hint="wait and run the step again")
        if isinstance(e, openai.APIStatusError):
            return ServiceError(f"{what} failed ({e.status_code}): {e.message}",
                                hint="try again later" if e.status_code >= 500 else None)
        return ServiceError(f"{what} failed: {e}")


def _turn(r: Any, model: str) -> Turn:
    choice = r.choices[0]
    msg = choice.message
    usage = {}
    if r.usage is not None:
        usage = {"input_tokens": r.usage.prompt_tokens, "output_tokens": r.usage.completion_tokens}
    stop = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens",
            "content_filter": "refusal"}.get(choice.finish_reason or "", choice.finish_reason or "")
    if getattr(msg, "refusal", None):
        return Turn(tool_input=None, text=msg.content or "", model=r.model or model, usage=usage,
                    stop_reason="refusal", detail=msg.refusal)
    calls = msg.tool_calls or []
    if not calls:
        return Turn(tool_input=None, text=msg.content or "", model=r.model or model, usage=usage,
                    stop_reason=stop)
    call = calls[0]
    value, error = parse_arguments(call.function.arguments)
    return Turn(tool_input=value, text=msg.content or "", model=r.model or model, usage=usage,
                stop_reason=stop, detail=error, call_id=call.id, raw=call.function.arguments)
