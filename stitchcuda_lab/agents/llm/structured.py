"""One structured LLM call, provider-neutral: a forced tool, a validated reply, one repair.

Providers (``client.ClaudeClient``, ``openai_client.OpenAIClient``, ``replay.ReplayClient``)
implement one seam, ``_send(request, repair) -> Turn``; everything else lives here: stop
reasons, schema and semantic validation, the single repair turn, and recording every
exchange through ``recorder`` (a callable taking one JSON-able dict, the payload of a session
event of kind ``llm_exchange``). Records hold the prompt, the reply, the model and the token
usage; never request headers or keys.

>>> tool = Tool("submit_x", "Submit x.", {"type": "object", "required": ["x"]})
>>> req = Request(role="planner", task="plan", system="s", user="u", tool=tool)
>>> req.prompt()["tool"]
'submit_x'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import ServiceError
from .schema import validate

Recorder = Callable[[dict[str, Any]], None]
Progress = Callable[[dict[str, Any]], None]


@dataclass
class Tool:
    """The one tool the model must call; its input is the structured reply."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass
class Request:
    """What an agent asks: a stable system prefix, per-problem context, this turn's message."""

    role: str                   # planner | coder | reviewer
    task: str                   # "plan", the plan task ids ("t1,t2"), "review:<candidate>"
    system: str                 # stable instructions (cached)
    user: str                   # this turn (feedback, refine request)
    tool: Tool
    context: str = ""           # per-problem block: source, graph, profile, rag (cached)
    refs: list[str] = field(default_factory=list)   # rag section ids shown in the prompt
    iteration: int | None = None
    # Semantic checks beyond the schema (names exist, program parses); messages go to repair.
    check: Callable[[dict[str, Any]], list[str]] | None = None

    def prompt(self) -> dict[str, Any]:
        return {"system": self.system, "context": self.context, "user": self.user,
                "tool": self.tool.name}


@dataclass
class Turn:
    """One reply from a provider, normalised."""

    tool_input: Any             # the tool call's input (a dict when well-formed), or None
    text: str = ""
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = ""       # tool_use | end_turn | max_tokens | refusal | ...
    detail: str = ""            # refusal explanation, or the raw arguments that failed to parse
    call_id: str = ""           # the tool call's id, for the repair turn
    raw: str = ""               # the tool arguments as sent (OpenAI-style JSON text)


@dataclass
class Reply:
    """A validated structured reply."""

    data: dict[str, Any]
    model: str
    usage: dict[str, Any]
    attempts: int
    text: str = ""


class StructuredClient:
    """Base of every provider: ``ask`` runs the call, validation and repair, and records."""

    provider = "base"

    def __init__(self, *, model: str, max_tokens: int, recorder: Recorder | None = None,
                 progress: Progress | None = None):
        self.model = model
        self.max_tokens = max_tokens
        self.recorder = recorder
        self.progress = progress

    # The seam: one request/response with the provider. ``repair`` is the previous turn and
    # the validation message to send back as the tool's error result.
    def _send(self, request: Request, repair: tuple[Turn, str] | None) -> Turn:
        raise NotImplementedError

    def ask(self, request: Request) -> Reply:
        """Send ``request``; return the tool input once it validates (one repair allowed)."""
        repair: tuple[Turn, str] | None = None
        for attempt in (1, 2):
            turn = self._send(request, repair)
            problem = self._stop_problem(turn)
            errors = [] if problem else self._errors(request, turn)
            self._record(request, turn, attempt, repair, errors, problem)
            if problem:
                raise ServiceError(problem[0], hint=problem[1])
            if not errors:
                return Reply(data=turn.tool_input, model=turn.model or self.model,
                             usage=turn.usage, attempts=attempt, text=turn.text)
            repair = (turn, _repair_message(request.tool, errors))
        raise ServiceError(
            f"{self.provider} returned a malformed {request.tool.name} reply for the {request.role}"
            f" twice; last problems: {'; '.join(errors[:5])}",
            hint="run the iteration again, or use a stronger model (STITCH_MODEL)")

    def _stop_problem(self, turn: Turn) -> tuple[str, str] | None:
        if turn.stop_reason == "refusal":
            why = f": {turn.detail}" if turn.detail else ""
            return (f"{self.provider} declined to answer (stop_reason 'refusal'){why}",
                    "rephrase the problem or plan, or continue with --agent offline")
        if turn.stop_reason in ("max_tokens", "length"):
            return ((f"the {self.provider} reply was cut off at max_tokens={self.max_tokens} "
                     f"(stop_reason {turn.stop_reason!r}) before the tool call was complete"),
                    "raise STITCH_MAX_TOKENS (Settings.max_tokens) and run the step again")
        if turn.stop_reason == "model_context_window_exceeded":
            return (f"the prompt and reply exceed {turn.model or self.model}'s context window",
                    "lower STITCH_RAG_TOP_K or shorten the problem source")
        return None

    def _errors(self, request: Request, turn: Turn) -> list[str]:
        if turn.tool_input is None:
            why = f" ({turn.detail})" if turn.detail else ""
            return [f"no {request.tool.name} tool call in the reply{why}"]
        errors = validate(turn.tool_input, request.tool.schema)
        if not errors and request.check is not None:
            errors = request.check(turn.tool_input)
        return errors

    def _record(self, request: Request, turn: Turn, attempt: int,
                repair: tuple[Turn, str] | None, errors: list[str],
                problem: tuple[str, str] | None) -> None:
        if self.recorder is None:
            return
        prompt = request.prompt()
        if repair is not None:
            prompt["repair"] = repair[1]
        self.recorder({
            "role": request.role,
            "task": request.task,
            "iteration": request.iteration,
            "provider": self.provider,
            "model": turn.model or self.model,
            "attempt": attempt,
            "prompt": prompt,
            "reply": {"tool": request.tool.name, "input": turn.tool_input, "text": turn.text,
                      "stop_reason": turn.stop_reason, "detail": turn.detail},
            "usage": dict(turn.usage),
            "refs": list(request.refs),
            "errors": list(errors) + ([problem[0]] if problem else []),
        })

    def _emit(self, request: Request, phase: str, **info: Any) -> None:
        if self.progress is not None:
            self.progress({"role": request.role, "task": request.task,
                           "provider": self.provider, "phase": phase, **info})


def _repair_message(tool: Tool, errors: list[str]) -> str:
    listed = "\n".join(f"- {e}" for e in errors[:20])
    return (f"The {tool.name} input was rejected:\n{listed}\n"
            f"Call {tool.name} again with the complete, corrected input (all fields, not a diff).")


def parse_arguments(raw: str) -> tuple[Any, str]:
    """JSON tool arguments as sent by OpenAI-style servers: (value or None, parse error)."""
    try:
        return json.loads(raw or "{}"), ""
    except json.JSONDecodeError as e:
        return None, f"arguments are not valid JSON: {e}"
