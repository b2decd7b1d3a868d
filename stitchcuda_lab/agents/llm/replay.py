"""Replay of recorded LLM exchanges: a session answered again without the network.

``ReplayClient`` serves a session's recorded exchanges (payloads of ``llm_exchange`` events)
through the same ``ask`` path as a live provider, one recorded call (``ask`` id) per call, so
validation, repairs and retries take the recorded course: a recorded broken stream is raised
again (and retried at once), a recorded repair is served as the repair, and a call the
recording gave up on gives up again. Exchanges become training data in ``export.py``.

>>> client = ReplayClient([])
>>> client.remaining()
{}
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import ReplayExhausted, ReplyError, ServiceError, StoreError
from .structured import Progress, Recorder, Reply, Repair, Request, StructuredClient, Transient, Turn

EXCHANGE_KIND = "llm_exchange"
_UNBOUNDED = 1 << 30


class ReplayClient(StructuredClient):
    """A provider that answers from recorded exchanges instead of the network."""

    provider = "replay"

    def __init__(self, exchanges: Iterable[dict[str, Any]], *, recorder: Recorder | None = None,
                 progress: Progress | None = None, strict: bool = False):
        exchanges = [e for e in (exchange_payload(x) for x in exchanges) if e is not None]
        model = exchanges[0].get("model", "replay") if exchanges else "replay"
        # the recording decides how many tries a call takes; replay follows it
        super().__init__(model=model, max_tokens=1, max_tokens_limit=_UNBOUNDED,
                         retries=_UNBOUNDED, repairs=_UNBOUNDED, recorder=recorder,
                         progress=progress, sleep=lambda seconds: None)
        # the provider that made the recording names the replayed plans and candidates
        self.origin = next((e["provider"] for e in exchanges
                            if e.get("provider") not in (None, "replay")), "claude")
        self.strict = strict
        self._calls: dict[str, deque[list[dict[str, Any]]]] = {}
        for call in _calls(exchanges):
            self._calls.setdefault(call[0]["role"], deque()).append(call)
        self._current: deque[dict[str, Any]] = deque()
        self._last: dict[str, Any] = {}
        self._served = 0

    @classmethod
    def from_session(cls, source: str | Path | Iterable[dict[str, Any]], **kw: Any) -> ReplayClient:
        """From a session folder, an events JSONL file, or an iterable of events/payloads."""
        return cls(load_exchanges(source), **kw)

    def remaining(self) -> dict[str, int]:
        """Recorded exchanges not yet served, per role."""
        return {role: sum(len(c) for c in calls) for role, calls in self._calls.items() if calls}

    def ask(self, request: Request) -> Reply:
        calls = self._calls.get(request.role)
        if not calls:
            raise ReplayExhausted(f"the recording has no more {request.role} exchanges to replay "
                               f"(task {request.task})",
                               hint="replay stops where the recorded session stopped; run it "
                                    "with a live agent to go further")
        self._current = deque(calls.popleft())
        return super().ask(request)

    def _send(self, request: Request, repair: Repair | None, max_tokens: int) -> Turn:
        if not self._current:   # the recording gave up on this call here
            last = self._last.get("error") or {}
            raise ReplyError(f"as recorded, the {request.role} call (task {request.task}) ended "
                             f"without a usable reply: {last.get('message', 'no reply')}",
                             kind=self._last.get("outcome") or "invalid")
        e = self._last = self._current.popleft()
        if self.strict and e.get("prompt", {}).get("user") != request.user:
            raise ServiceError(f"replayed {request.role} exchange {self._served} was recorded "
                               "for a different prompt", hint="replay without strict")
        self._served += 1
        r = e.get("reply", {})
        if e.get("outcome") == "error":
            err = e.get("error") or {}
            raise Transient(f"recorded failure: {err.get('message', 'error')}",
                            kind=err.get("kind", "server"), retry_after=0.0,
                            usage=e.get("usage", {}), model=e.get("model", ""))
        self._emit(request, "done", usage=e.get("usage", {}), replay=True)
        return Turn(tool_input=r.get("input"), text=r.get("text", ""), model=e.get("model", ""),
                    usage=dict(e.get("usage", {})), stop_reason=r.get("stop_reason", "tool_use"),
                    detail=r.get("detail", ""), thinking=r.get("thinking", ""),
                    call_id=f"replay_{self._served}")


def _calls(exchanges: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Exchanges grouped into calls: by ``ask`` id, or (older records) a new call at attempt 1."""
    calls: list[list[dict[str, Any]]] = []
    open_by_role: dict[str, list[dict[str, Any]]] = {}
    for e in exchanges:
        role = e["role"]
        cur = open_by_role.get(role)
        new = (cur is None or (e.get("ask") or None) != (cur[0].get("ask") or None)
               or (not e.get("ask") and e.get("attempt", 1) == 1))
        if cur is None or new:
            cur = []
            calls.append(cur)
            open_by_role[role] = cur
        cur.append(e)
    return calls


def exchange_payload(event: dict[str, Any]) -> dict[str, Any] | None:
    """The exchange payload of a session event (or the payload itself); None for other events."""
    if "kind" in event:
        if event["kind"] != EXCHANGE_KIND:
            return None
        event = event.get("payload", event.get("data", {}))
    return event if "role" in event and "reply" in event else None


def load_exchanges(source: str | Path | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Exchange payloads, in order, from a session folder, a JSONL file or events."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if (path / "events.jsonl").exists():   # a session folder: artifacts resolved
            from ...store import SessionLog
            source = [r.to_dict() for r in SessionLog(path).records()]
        elif path.is_file():                   # exported exchanges or events, one a line
            events = []
            for line in path.read_text().splitlines():
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue                   # a torn last line after a crash
            source = events
        else:
            raise StoreError(f"no session events found at {path}",
                             hint="pass a session folder or an events .jsonl file")
    return [p for p in (exchange_payload(e) for e in source) if p is not None]
