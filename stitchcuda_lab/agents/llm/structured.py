"""One structured LLM call, provider-neutral: a forced tool, a validated reply, and recovery.

Providers (``client.ClaudeClient``, ``openai_client.OpenAIClient``, ``replay.ReplayClient``)
implement one seam, ``_send(request, repair, max_tokens) -> Turn``, and raise ``Transient`` for
what may pass (overloads, rate limits, a stream broken by an error event, timeouts, dropped
connections). Everything else lives here, in ``ask``:

- transient failures are retried ``retries`` times with exponential backoff, honouring the
  server's ``retry-after``; the wait is reported as progress (phase ``waiting``);
- a reply cut off at ``max_tokens`` is asked again with twice the budget, up to
  ``max_tokens_limit``; at the limit the model is told to answer shorter;
- a reply that breaks the schema or the request's checks, or repeats an earlier candidate, goes
  back to the model with the validation message (``repairs`` times);
- a refusal is asked again once more with a note on what the task is;
- what still fails is a ``ReplyError`` (the loop records a failed attempt and goes on), and
  what cannot go on (a rejected key, an unknown model, retries exhausted) a ``ServiceError``
  or ``ConfigError``.

Every exchange, failed ones included, is recorded through ``recorder`` (a callable taking one
JSON-able dict, the payload of a session event of kind ``llm_exchange``) with its attempt,
outcome, error, usage and cost; never request headers or keys. ``guard`` (set by the session)
runs before every request, given the client, and raises ``BudgetExceeded`` when the session's
cap is reached (or cannot be enforced: a cost cap on an unpriced model).

>>> tool = Tool("submit_x", "Submit x.", {"type": "object", "required": ["x"]})
>>> req = Request(role="planner", task="plan", system="s", user="u", tool=tool)
>>> req.prompt()["tool"]
'submit_x'
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import ReplyError, ServiceError
from ...redact import redact_urls
from .pricing import Price
from .schema import validate

Recorder = Callable[[dict[str, Any]], None]
Progress = Callable[[dict[str, Any]], None]

MAX_BACKOFF = 60.0       # seconds, the longest wait between two tries
MAX_RETRY_AFTER = 300.0  # a server asking for longer than this is not waited for

# Outcomes of one exchange, as records and trajectories name them ("error": the request
# failed or its stream broke; "too_long": the prompt exceeds the context window).
OUTCOMES = ("accepted", "invalid", "repeated", "truncated", "refused", "error", "too_long")

REFUSAL_NOTE = (
    "Note: this is performance engineering on a numerical PyTorch model. The task is to write "
    "GPU/CPU kernels that compute the same outputs faster; nothing else is asked for.")


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
    # Says why a valid reply repeats earlier work (a candidate already verified), else None.
    repeat: Callable[[dict[str, Any]], str | None] | None = None
    # Extra record fields for an accepted reply (the coder's candidate id).
    annotate: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)   # recorded as is (skill, sample)

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
    thinking: str = ""          # the model's visible reasoning before the answer
    content: list[dict[str, Any]] = field(default_factory=list)  # blocks to send back (Claude)


@dataclass
class Repair:
    """What goes back to the model: its last turn (None: a fresh try) and the message."""

    turn: Turn | None
    message: str


class Transient(ServiceError):
    """A failure that may pass if asked again: overloaded, rate limited, a broken stream."""

    def __init__(self, message: str, *, kind: str, hint: str | None = None,
                 retry_after: float | None = None, usage: dict[str, Any] | None = None,
                 model: str = "", partial: str = ""):
        self.kind = kind                  # overloaded | rate_limited | server | timeout | network
        self.retry_after = retry_after    # seconds the server asked to wait, when it said
        self.usage = dict(usage or {})    # tokens reported before the failure
        self.model = model
        self.partial = partial            # text streamed before the failure
        super().__init__(message, hint=hint)


@dataclass
class Reply:
    """A validated structured reply."""

    data: dict[str, Any]
    model: str
    usage: dict[str, Any]
    attempts: int
    text: str = ""


class StructuredClient:
    """Base of every provider: ``ask`` runs the call, validation and recovery, and records."""

    provider = "base"

    def __init__(self, *, model: str, max_tokens: int, recorder: Recorder | None = None,
                 progress: Progress | None = None, max_tokens_limit: int | None = None,
                 retries: int = 4, backoff: float = 2.0, repairs: int = 2,
                 price: Price | None = None, sleep: Callable[[float], None] = time.sleep):
        self.model = model
        self.max_tokens = max_tokens
        self.max_tokens_limit = max(max_tokens, max_tokens_limit or max_tokens)
        self.retries = retries
        self.backoff = backoff
        self.repairs = repairs
        self.price = price
        self.recorder = recorder
        self.progress = progress
        self.guard: Callable[[StructuredClient], None] | None = None
        self.sleep = sleep
        self.base_url = ""

    # The seam: one request/response with the provider. ``repair`` is what goes back to the
    # model (its last turn and the message), ``max_tokens`` this attempt's output budget.
    def _send(self, request: Request, repair: Repair | None, max_tokens: int) -> Turn:
        raise NotImplementedError

    def ask(self, request: Request) -> Reply:
        """Send ``request``; return the tool input once it validates (see the module doc)."""
        ask_id = uuid.uuid4().hex[:12]
        budget, repair = self.max_tokens, None
        attempt = retried = repaired = 0
        refused = False
        while True:
            if self.guard is not None:
                self.guard(self)
            attempt += 1
            try:
                turn = self._send(request, repair, budget)
            except Transient as e:
                self._record(request, ask_id, attempt, repair, budget, _broken_turn(e, self.model),
                             "error", {"kind": e.kind, "message": redact_urls(e.message)})
                if retried >= self.retries:
                    tries = (f", and {self.retries} {'retry' if self.retries == 1 else 'retries'}"
                             " did not get through") if self.retries else ""
                    raise ServiceError(redact_urls(e.message) + tries, hint=e.hint) from None
                retried += 1
                wait = self._wait(e, retried)
                self._emit(request, "waiting", seconds=round(wait, 3), reason=e.kind,
                           retry=retried, retries=self.retries)
                self.sleep(wait)
                continue
            outcome, errors = self._judge(request, turn)
            error = {"kind": outcome, "message": "; ".join(errors)} if errors else None
            self._record(request, ask_id, attempt, repair, budget, turn, outcome, error)
            if outcome == "accepted":
                return Reply(data=turn.tool_input, model=turn.model or self.model,
                             usage=turn.usage, attempts=attempt, text=turn.text)
            if outcome == "too_long":
                raise ServiceError(errors[0], hint="lower STITCH_RAG_TOP_K or STITCH_MEMORY_TOKENS,"
                                                   " or shorten the problem source")
            if outcome == "truncated" and budget < self.max_tokens_limit:
                budget = min(budget * 2, self.max_tokens_limit)
                self._emit(request, "retrying", reason="truncated", max_tokens=budget)
                continue
            if outcome == "refused":
                if refused:
                    raise ReplyError(f"{self.provider} declined to answer twice{_why(turn)}",
                                     kind="refused", hint="rephrase the problem or plan, or "
                                                          "continue with --agent offline")
                refused = True
                repair = Repair(None, REFUSAL_NOTE)
                self._emit(request, "retrying", reason="refused")
                continue
            if repaired >= self.repairs:
                raise ReplyError(self._give_up(request, outcome, errors, budget), kind=outcome,
                                 hint="run the iteration again, or use a stronger model "
                                      "(STITCH_MODEL)" if outcome != "truncated" else
                                      "raise STITCH_MAX_TOKENS_LIMIT or simplify the plan")
            repaired += 1
            if outcome == "truncated":   # at the largest budget: a fresh try, told to be short
                repair = Repair(None, _shorter_message(budget))
            else:
                repair = Repair(turn, _repair_message(request.tool, errors))
            self._emit(request, "repair", reason=outcome, repair=repaired, repairs=self.repairs)

    # ------------------------------------------------------------------ judging a turn
    def _judge(self, request: Request, turn: Turn) -> tuple[str, list[str]]:
        """(outcome, error messages) for one turn."""
        if turn.stop_reason == "refusal":
            return "refused", [f"{self.provider} declined to answer (stop_reason 'refusal')"
                               f"{_why(turn)}"]
        if turn.stop_reason in ("max_tokens", "length"):
            return "truncated", [f"the reply was cut off at max_tokens (stop_reason "
                                 f"{turn.stop_reason!r}) before the tool call was complete"]
        if turn.stop_reason == "model_context_window_exceeded":
            return "too_long", [f"the prompt and reply exceed {turn.model or self.model}'s "
                                "context window"]
        if turn.tool_input is None:
            why = f" ({turn.detail})" if turn.detail else ""
            return "invalid", [f"no {request.tool.name} tool call in the reply{why}"]
        errors = validate(turn.tool_input, request.tool.schema)
        if not errors and request.check is not None:
            errors = request.check(turn.tool_input)
        if errors:
            return "invalid", errors
        if request.repeat is not None:
            again = request.repeat(turn.tool_input)
            if again:
                return "repeated", [again]
        return "accepted", []

    def _give_up(self, request: Request, outcome: str, errors: list[str], budget: int) -> str:
        what = {"invalid": f"a malformed {request.tool.name} reply",
                "repeated": "a candidate it had already submitted",
                "truncated": f"replies cut off at max_tokens={budget}"}.get(outcome, outcome)
        return (f"{self.provider} returned {what} for the {request.role} "
                f"{self.repairs + 1} times; last problems: {'; '.join(errors[:5])}")

    def _wait(self, e: Transient, retry: int) -> float:
        if e.retry_after is not None and 0 <= e.retry_after <= MAX_RETRY_AFTER:
            return e.retry_after
        base = min(self.backoff * 2 ** (retry - 1), MAX_BACKOFF)
        return base * (0.75 + 0.5 * random.random())   # jitter: many clients, one server

    # ------------------------------------------------------------------ records, progress
    def _record(self, request: Request, ask_id: str, attempt: int, repair: Repair | None,
                budget: int, turn: Turn, outcome: str, error: dict[str, Any] | None) -> None:
        prompt = request.prompt()
        prompt["max_tokens"] = budget
        if repair is not None:
            if repair.turn is None:
                prompt["note"] = repair.message
            else:
                prompt["repair"] = repair.message
                prompt["previous"] = {"input": repair.turn.tool_input, "text": repair.turn.text}
        usage = dict(turn.usage)
        record = {
            "role": request.role, "task": request.task, "iteration": request.iteration,
            "provider": self.provider, "model": turn.model or self.model,
            "ask": ask_id, "attempt": attempt, "outcome": outcome, "error": error,
            "prompt": prompt,
            "reply": {"tool": request.tool.name, "input": turn.tool_input, "text": turn.text,
                      "thinking": turn.thinking, "stop_reason": turn.stop_reason,
                      "detail": turn.detail},
            "usage": usage,
            "cost_usd": round(self.price.cost(usage), 8) if self.price is not None else None,
            "refs": list(request.refs),
            "errors": [error["message"]] if error else [],
            **request.meta,
        }
        if outcome == "accepted" and request.annotate is not None:
            record.update(request.annotate(turn.tool_input))
        if self.recorder is not None:
            self.recorder(record)
        self._emit(request, "result", outcome=outcome, usage=usage,
                   cost_usd=record["cost_usd"], attempt=attempt)

    def _emit(self, request: Request, phase: str, **info: Any) -> None:
        if self.progress is not None:
            self.progress({"role": request.role, "task": request.task,
                           "provider": self.provider, "phase": phase, **info})


def _broken_turn(e: Transient, model: str) -> Turn:
    return Turn(tool_input=None, text=e.partial, model=e.model or model, usage=e.usage,
                stop_reason="error")


def _why(turn: Turn) -> str:
    return f": {turn.detail}" if turn.detail else ""


def _repair_message(tool: Tool, errors: list[str]) -> str:
    listed = "\n".join(f"- {e}" for e in errors[:20])
    return (f"The {tool.name} input was rejected:\n{listed}\n"
            f"Call {tool.name} again with the complete, corrected input (all fields, not a diff).")


def _shorter_message(budget: int) -> str:
    return (f"Note: an earlier answer to this request was cut off at {budget} output tokens. "
            "Answer within that budget: no comments or notes beyond what is needed, fewer "
            "kernels if they can be merged, no repeated code.")


def parse_arguments(raw: str) -> tuple[Any, str]:
    """JSON tool arguments as sent by OpenAI-style servers: (value or None, parse error)."""
    try:
        return json.loads(raw or "{}"), ""
    except json.JSONDecodeError as e:
        return None, f"arguments are not valid JSON: {e}"
