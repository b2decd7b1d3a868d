"""Replay and export of recorded LLM exchanges.

``ReplayClient`` serves a session's recorded exchanges (payloads of ``llm_exchange`` events)
in order, per role, through the same ``ask`` path as a live provider, so a session replays
without network and with the same validation and repair. ``trajectories`` pairs each coder
exchange with the verdict of the candidate it produced (matched by candidate id, which depends
only on the code) as training records {task, prompt, reply, verdict, reward}.

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

from ...errors import ServiceError, StoreError
from ...verdict import Verdict
from ..rubric import reward
from .coder import candidate_from_reply
from .structured import Progress, Recorder, Request, StructuredClient, Turn

EXCHANGE_KIND = "llm_exchange"


class ReplayClient(StructuredClient):
    """A provider that answers from recorded exchanges instead of the network."""

    provider = "replay"

    def __init__(self, exchanges: Iterable[dict[str, Any]], *, recorder: Recorder | None = None,
                 progress: Progress | None = None, strict: bool = False):
        exchanges = [exchange_payload(e) for e in exchanges]
        exchanges = [e for e in exchanges if e is not None]
        model = exchanges[0].get("model", "replay") if exchanges else "replay"
        super().__init__(model=model, max_tokens=0, recorder=recorder, progress=progress)
        # the provider that made the recording names the replayed plans and candidates
        self.origin = next((e["provider"] for e in exchanges
                            if e.get("provider") not in (None, "replay")), "claude")
        self.strict = strict
        self._queues: dict[str, deque[dict[str, Any]]] = {}
        for e in exchanges:
            self._queues.setdefault(e["role"], deque()).append(e)
        self._served = 0

    @classmethod
    def from_session(cls, source: str | Path | Iterable[dict[str, Any]], **kw: Any) -> ReplayClient:
        """From a session folder, an events JSONL file, or an iterable of events/payloads."""
        return cls(load_exchanges(source), **kw)

    def remaining(self) -> dict[str, int]:
        return {role: len(q) for role, q in self._queues.items() if q}

    def _send(self, request: Request, repair: tuple[Turn, str] | None) -> Turn:
        queue = self._queues.get(request.role)
        if not queue:
            raise ServiceError(f"the recording has no more {request.role} exchanges to replay "
                               f"(task {request.task})",
                               hint="replay stops where the recorded session stopped; run it "
                                    "with a live agent to go further")
        e = queue.popleft()
        if self.strict and e.get("prompt", {}).get("user") != request.user:
            raise ServiceError(f"replayed {request.role} exchange {self._served} was recorded "
                               "for a different prompt", hint="replay without strict")
        self._served += 1
        r = e.get("reply", {})
        self._emit(request, "done", usage=e.get("usage", {}), replay=True)
        return Turn(tool_input=r.get("input"), text=r.get("text", ""), model=e.get("model", ""),
                    usage=dict(e.get("usage", {})), stop_reason=r.get("stop_reason", "tool_use"),
                    detail=r.get("detail", ""), call_id=f"replay_{self._served}")


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


def trajectories(exchanges: Iterable[dict[str, Any]],
                 verdicts: Iterable[Verdict | dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Training records {task, role, iteration, prompt, reply, model, usage, candidate_id,
    verdict, reward} for every coder exchange whose reply was accepted."""
    by_id: dict[str, Verdict] = {}
    for v in verdicts:
        v = v if isinstance(v, Verdict) else Verdict.from_dict(v)
        by_id[v.candidate_id] = v
    out = []
    for e in (p for p in (exchange_payload(x) for x in exchanges) if p is not None):
        if e["role"] != "coder" or e.get("errors") or not isinstance(e["reply"].get("input"), dict):
            continue
        try:
            cid = candidate_from_reply(e["reply"]["input"]).id
        except (KeyError, TypeError):
            continue
        v = by_id.get(cid)
        out.append({"task": e.get("task"), "role": e["role"], "iteration": e.get("iteration"),
                    "prompt": e["prompt"], "reply": e["reply"], "model": e.get("model"),
                    "usage": e.get("usage", {}), "candidate_id": cid,
                    "verdict": v.to_dict() if v is not None else None,
                    "reward": reward(v) if v is not None else None})
    return out


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """One JSON object per line (what ``export --trajectories`` writes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    return path
