"""The optimisation loop as a pure state machine: ``step(state, event) -> State``.

Nothing here waits, runs code or touches a device: the Session (or a test) posts events, and
``state.needs`` says what must happen next, so a notebook can stop at any point and a resumed
session rebuilds its state by replaying the recorded events.

    new --PlanProposed--> planned --PlanApproved--> plan_approved --CandidatesProposed--> coded
    coded --CandidateApproved--> candidate_approved --VerdictReady (all approved)--> verified
    verified --CandidateApproved (one still pending) | CandidateEdited--> candidate_approved | coded
    verified --NextIteration--> refining --CandidatesProposed--> coded ...
    plan_approved | refining --AttemptFailed (the coder's replies were unusable)--> verified
    verified | refining | plan_approved --Finished--> done;  any --Stop--> stopped;
    any --Failed--> failed

``needs`` is one of "plan", "approve_plan", "code", "approve_candidate", "verify", "next" or
None (finished). The best candidate is the passing one with the highest speedup over eager; a
candidate that failed verification is never best.

>>> s = step(State(), PlanProposed(Plan()))
>>> s.phase, s.needs
('planned', 'approve_plan')
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, ClassVar

from .errors import InvalidEvent
from .candidate import Candidate
from .plan import Plan
from .verdict import Verdict, load_changed

PHASES = ("new", "planned", "plan_approved", "coded", "candidate_approved", "verified",
          "refining", "done", "stopped", "failed")
TERMINAL = ("done", "stopped", "failed")
_NEEDS = {"new": "plan", "planned": "approve_plan", "plan_approved": "code", "refining": "code",
          "coded": "approve_candidate", "candidate_approved": "verify", "verified": "next"}


# ----------------------------------------------------------------------------- events


class Event:
    """Base of loop events. ``kind`` names the event in the session log."""

    kind: ClassVar[str] = ""
    # every event is a dataclass: what ``dataclasses.fields`` looks for (declared only)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def payload(self) -> dict[str, Any]:
        """JSON-able fields of the event (plans, candidates and verdicts as dicts)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if hasattr(v, "to_dict"):
                v = v.to_dict()
            elif isinstance(v, list):
                v = [x.to_dict() if hasattr(x, "to_dict") else x for x in v]
            out[f.name] = v
        return out


@dataclass(frozen=True)
class PlanProposed(Event):
    plan: Plan
    kind: ClassVar[str] = "plan_proposed"


@dataclass(frozen=True)
class PlanEdited(Event):
    plan: Plan
    kind: ClassVar[str] = "plan_edited"


@dataclass(frozen=True)
class PlanApproved(Event):
    kind: ClassVar[str] = "plan_approved"


@dataclass(frozen=True)
class CandidatesProposed(Event):
    candidates: list[Candidate]
    kind: ClassVar[str] = "candidates_proposed"


@dataclass(frozen=True)
class CandidateEdited(Event):
    candidate: Candidate
    kind: ClassVar[str] = "candidate_edited"


@dataclass(frozen=True)
class CandidateApproved(Event):
    candidate_id: str
    kind: ClassVar[str] = "candidate_approved"


@dataclass(frozen=True)
class VerdictReady(Event):
    candidate_id: str
    verdict: Verdict
    kind: ClassVar[str] = "verdict_ready"


@dataclass(frozen=True)
class AttemptFailed(Event):
    """The Coder could not produce a candidate this iteration (replies malformed, refused,
    cut off or repeating earlier work, after every repair). The iteration ends without a
    verdict; the failure is remembered and shown to the Coder next time."""

    cause: str          # invalid | repeated | truncated | refused
    reason: str
    kind: ClassVar[str] = "attempt_failed"


@dataclass(frozen=True)
class NextIteration(Event):
    kind: ClassVar[str] = "next_iteration"


@dataclass(frozen=True)
class Regenerate(Event):
    """Set the waiting candidates aside and ask the Coder again, at the same iteration."""

    kind: ClassVar[str] = "regenerate"


@dataclass(frozen=True)
class Finished(Event):
    reason: str = ""
    kind: ClassVar[str] = "finished"


@dataclass(frozen=True)
class Stop(Event):
    reason: str = ""
    kind: ClassVar[str] = "stop"


@dataclass(frozen=True)
class Failed(Event):
    message: str
    kind: ClassVar[str] = "failed"


EVENTS: dict[str, type[Event]] = {c.kind: c for c in (
    PlanProposed, PlanEdited, PlanApproved, CandidatesProposed, CandidateEdited,
    CandidateApproved, VerdictReady, AttemptFailed, NextIteration, Regenerate, Finished, Stop,
    Failed)}
TERMINAL_KINDS = ("finished", "stop", "failed")


def event_from_payload(kind: str, payload: dict[str, Any]) -> Event:
    """Rebuild a loop event from its log record. Raises KeyError for non-loop kinds."""
    cls = EVENTS[kind]
    p = dict(payload)
    if "plan" in p:
        p["plan"] = Plan.from_dict(p["plan"])
    if "candidates" in p:
        p["candidates"] = [Candidate.from_dict(c) for c in p["candidates"]]
    if "candidate" in p:
        p["candidate"] = Candidate.from_dict(p["candidate"])
    if "verdict" in p:
        p["verdict"] = Verdict.from_dict(p["verdict"])
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in p.items() if k in names})


# ----------------------------------------------------------------------------- state


@dataclass(frozen=True)
class Attempt:
    """One try of the Coder: a candidate with its verdict (None while unverified), or a
    failure without a candidate (``failure`` says why, ``cause`` its kind)."""

    iteration: int
    candidate: Candidate | None = None
    verdict: Verdict | None = None
    cause: str = ""
    failure: str = ""


@dataclass
class State:
    """Everything the loop knows. Round-trips through ``to_dict`` / ``from_dict``."""

    phase: str = "new"
    needs: str | None = "plan"
    iteration: int = 0
    plan: Plan | None = None
    candidates: dict[str, Candidate] = field(default_factory=dict)   # by id, in arrival order
    verdicts: dict[str, Verdict] = field(default_factory=dict)       # by candidate id
    pending: list[str] = field(default_factory=list)     # proposed, awaiting approval
    approved: list[str] = field(default_factory=list)    # approved, awaiting a verdict
    best: str | None = None                              # best candidate id so far
    best_by_iteration: list[float | None] = field(default_factory=list)  # best speedup after i
    history: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""                                    # why it finished / stopped / failed
    failures: list[dict[str, Any]] = field(default_factory=list)   # AttemptFailed, in order

    # --- queries
    def best_pair(self) -> tuple[Candidate, Verdict] | None:
        if self.best is None:
            return None
        return self.candidates[self.best], self.verdicts[self.best]

    def iteration_candidates(self, iteration: int | None = None) -> list[Candidate]:
        it = self.iteration if iteration is None else iteration
        return [c for c in self.candidates.values() if c.iteration == it]

    def last_verdict(self) -> Verdict | None:
        return next(reversed(self.verdicts.values()), None) if self.verdicts else None

    def attempts(self) -> list[Attempt]:
        """Every try so far in order: candidates with their verdicts, and failed iterations."""
        out = [Attempt(iteration=c.iteration, candidate=c, verdict=self.verdicts.get(cid))
               for cid, c in self.candidates.items()]
        out += [Attempt(iteration=f["iteration"], cause=f["cause"], failure=f["reason"])
                for f in self.failures]
        order = {id(a): i for i, a in enumerate(out)}
        return sorted(out, key=lambda a: (a.iteration, a.candidate is None, order[id(a)]))

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL

    # --- JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase, "needs": self.needs, "iteration": self.iteration,
            "plan": self.plan.to_dict() if self.plan else None,
            "candidates": [c.to_dict() for c in self.candidates.values()],
            "verdicts": {k: v.to_dict() for k, v in self.verdicts.items()},
            "pending": list(self.pending), "approved": list(self.approved), "best": self.best,
            "best_by_iteration": list(self.best_by_iteration),
            "history": [dict(h) for h in self.history], "message": self.message,
            "failures": [dict(f) for f in self.failures],
        }

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> State:
        cands = [Candidate.from_dict(c) for c in d.get("candidates", [])]
        return cls(
            phase=d["phase"], needs=d.get("needs"), iteration=d.get("iteration", 0),
            plan=Plan.from_dict(d["plan"]) if d.get("plan") else None,
            candidates={c.id: c for c in cands},
            verdicts={k: Verdict.from_dict(v) for k, v in d.get("verdicts", {}).items()},
            pending=list(d.get("pending", [])), approved=list(d.get("approved", [])),
            best=d.get("best"), best_by_iteration=list(d.get("best_by_iteration", [])),
            history=[dict(h) for h in d.get("history", [])], message=d.get("message", ""),
            failures=[dict(f) for f in d.get("failures", [])])

    @classmethod
    def from_json(cls, s: str) -> State:
        return cls.from_dict(json.loads(s))

    def __str__(self) -> str:
        best = self.best_pair()
        b = f"; best {best[0].id} {best[1].summary()}" if best else ""
        return (f"State {self.phase} (iteration {self.iteration}, needs {self.needs}, "
                f"{len(self.candidates)} candidates){b}")


# ----------------------------------------------------------------------------- transitions


def step(state: State, event: Event) -> State:
    """The state after ``event``. Never mutates ``state``; raises InvalidEvent when the event
    does not fit the current phase."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise InvalidEvent(f"{type(event).__name__} is not a loop event")
    s = _copy(state)
    if s.phase in TERMINAL:
        _refuse(state, event, "the session has finished")
    handler(s, event)
    s.needs = _NEEDS.get(s.phase)
    s.history.append({"event": event.kind, "from": state.phase, "to": s.phase,
                      "iteration": s.iteration, **_summary(event)})
    return s


def replay(events: list[Event], state: State | None = None) -> State:
    """Fold ``step`` over events (how a resumed session rebuilds its state)."""
    s = state or State()
    for e in events:
        s = step(s, e)
    return s


def _copy(s: State) -> State:
    return dataclasses.replace(s, candidates=dict(s.candidates), verdicts=dict(s.verdicts),
                               pending=list(s.pending), approved=list(s.approved),
                               best_by_iteration=list(s.best_by_iteration),
                               history=list(s.history), failures=list(s.failures))


def _refuse(s: State, event: Event, why: str | None = None) -> None:
    allowed = sorted(k for k, ok in _ALLOWED.items() if s.phase in ok)
    raise InvalidEvent(
        f"cannot take {type(event).__name__} in phase {s.phase!r}"
        + (f": {why}" if why else ""),
        hint=f"the loop needs {s.needs!r} now; events it takes here: "
             f"{', '.join(allowed) or '(none, it has finished)'}")


def _expect(s: State, event: Event, *phases: str) -> None:
    if s.phase not in phases:
        _refuse(s, event)


def _on_plan(s: State, e: PlanProposed | PlanEdited) -> None:
    if isinstance(e, PlanProposed):
        _expect(s, e, "new", "planned")
    else:
        _expect(s, e, "planned")
    if not isinstance(e.plan, Plan):
        raise InvalidEvent(f"{type(e).__name__} needs a Plan, got {type(e.plan).__name__}")
    s.plan = dataclasses.replace(e.plan, approved=False)
    s.phase = "planned"


def _on_plan_approved(s: State, e: PlanApproved) -> None:
    _expect(s, e, "planned")
    assert s.plan is not None
    tasks = [dataclasses.replace(t, status="approved") if t.status == "proposed" else t
             for t in s.plan.tasks]
    s.plan = dataclasses.replace(s.plan, tasks=tasks, approved=True)
    s.phase = "plan_approved"


def _on_candidates(s: State, e: CandidatesProposed) -> None:
    _expect(s, e, "plan_approved", "refining")
    if not e.candidates:
        raise InvalidEvent("CandidatesProposed with no candidates",
                           hint="post Finished when the coder has nothing (more) to try")
    fresh = [c for c in e.candidates if c.id not in s.verdicts]
    if not fresh:
        raise InvalidEvent("every proposed candidate was verified before",
                           hint="post Finished when the coder has nothing new to try")
    for c in fresh:
        c = c if c.iteration == s.iteration else dataclasses.replace(c, iteration=s.iteration)
        known = s.candidates.get(c.id)
        if known is not None and known.parent != c.parent:   # a version keeps its first parent
            c = dataclasses.replace(c, parent=known.parent)
        s.candidates[c.id] = c
        if c.id not in s.pending:
            s.pending.append(c.id)
    s.phase = "coded"


def _on_candidate_edited(s: State, e: CandidateEdited) -> None:
    _expect(s, e, "coded", "candidate_approved", "verified")
    c = e.candidate
    if c.id in s.verdicts:
        raise InvalidEvent(f"candidate {c.id} was already verified; an edit must change the code",
                           hint="edit a kernel with Candidate.with_kernel(name, code)")
    # Versions form a tree: an edit hangs under a known version and never rewires one.
    if c.parent is not None and c.parent not in s.candidates:
        raise InvalidEvent(f"edited candidate {c.id} names {c.parent!r} as its parent, which "
                           "this session does not have",
                           hint=f"edit one of: {', '.join(s.candidates) or '(none yet)'}")
    known = s.candidates.get(c.id)
    if c.id == c.parent or (known is not None and known.parent != c.parent):
        raise InvalidEvent(f"edited candidate {c.id} would change the parent of an existing "
                           f"version ({known.parent if known else c.id!r} -> {c.parent!r})",
                           hint="give an edit its own id (jupyter.bridge.edited builds one "
                                "from the parent and the code)")
    s.candidates[c.id] = dataclasses.replace(c, iteration=s.iteration)
    if c.id not in s.pending:
        s.pending.append(c.id)
    if s.phase == "verified":
        s.phase = "coded"


def _on_candidate_approved(s: State, e: CandidateApproved) -> None:
    _expect(s, e, "coded", "candidate_approved", "verified")
    if e.candidate_id not in s.pending:
        known = ", ".join(s.pending) or "(none)"
        raise InvalidEvent(f"candidate {e.candidate_id!r} is not awaiting approval",
                           hint=f"candidates awaiting approval: {known}")
    s.pending.remove(e.candidate_id)
    s.approved.append(e.candidate_id)
    s.phase = "candidate_approved"


def _on_verdict(s: State, e: VerdictReady) -> None:
    _expect(s, e, "candidate_approved")
    if e.candidate_id not in s.approved:
        raise InvalidEvent(f"no approved candidate {e.candidate_id!r} is awaiting a verdict",
                           hint=f"awaiting a verdict: {', '.join(s.approved) or '(none)'}")
    v = e.verdict
    if v.candidate_id and v.candidate_id != e.candidate_id:
        raise InvalidEvent(f"verdict is for {v.candidate_id!r}, not {e.candidate_id!r}")
    s.approved.remove(e.candidate_id)
    s.verdicts[e.candidate_id] = dataclasses.replace(v, candidate_id=e.candidate_id)
    s.best = _best(s)
    if not s.approved:
        # Candidates still unapproved stay pending: the person may approve them from here.
        _close_iteration(s)


def _close_iteration(s: State) -> None:
    """The iteration is over: record the best speedup so far for it."""
    s.phase = "verified"
    bp = s.best_pair()
    score = (bp[1].speedup_vs_eager or 0.0) if bp else None
    while len(s.best_by_iteration) <= s.iteration:
        s.best_by_iteration.append(None)
    s.best_by_iteration[s.iteration] = score


def _on_attempt_failed(s: State, e: AttemptFailed) -> None:
    _expect(s, e, "plan_approved", "refining")
    s.failures.append({"iteration": s.iteration, "cause": e.cause, "reason": e.reason})
    _close_iteration(s)


def _best(s: State) -> str | None:
    """The passing candidate with the highest speedup over eager; one whose host's load
    changed while it was timed (its ratio compares two loads) only where none is steady."""
    best, score = None, None
    for cid, v in s.verdicts.items():
        if v.status != "pass" or not v.correct:
            continue
        steady = not load_changed(v.flags)
        sc = (steady, v.speedup_vs_eager if v.speedup_vs_eager is not None else 0.0)
        if score is None or sc > score:
            best, score = cid, sc
    return best


def _on_next(s: State, e: NextIteration) -> None:
    _expect(s, e, "verified")
    s.iteration += 1
    s.pending = []      # variants of the last iteration nobody approved are set aside
    s.phase = "refining"


def _on_regenerate(s: State, e: Regenerate) -> None:
    _expect(s, e, "coded", "verified")
    s.pending = []      # what the person did not want; verdicts so far stay as feedback
    s.phase = "plan_approved" if s.iteration == 0 else "refining"


def _on_finished(s: State, e: Finished) -> None:
    _expect(s, e, "verified", "refining", "plan_approved")
    s.phase, s.message = "done", e.reason


def _on_stop(s: State, e: Stop) -> None:
    s.phase, s.message = "stopped", e.reason or "stopped by the user"


def _on_failed(s: State, e: Failed) -> None:
    s.phase, s.message = "failed", e.message


_HANDLERS: dict[type[Event], Callable[[State, Any], None]] = {
    PlanProposed: _on_plan, PlanEdited: _on_plan, PlanApproved: _on_plan_approved,
    CandidatesProposed: _on_candidates, CandidateEdited: _on_candidate_edited,
    CandidateApproved: _on_candidate_approved, VerdictReady: _on_verdict,
    AttemptFailed: _on_attempt_failed, NextIteration: _on_next, Regenerate: _on_regenerate,
    Finished: _on_finished, Stop: _on_stop, Failed: _on_failed}
_NONTERMINAL = tuple(p for p in PHASES if p not in TERMINAL)
_ALLOWED = {"PlanProposed": ("new", "planned"), "PlanEdited": ("planned",),
            "PlanApproved": ("planned",), "CandidatesProposed": ("plan_approved", "refining"),
            "CandidateEdited": ("coded", "candidate_approved", "verified"),
            "CandidateApproved": ("coded", "candidate_approved", "verified"),
            "VerdictReady": ("candidate_approved",), "NextIteration": ("verified",),
            "AttemptFailed": ("plan_approved", "refining"),
            "Regenerate": ("coded", "verified"),
            "Finished": ("verified", "refining", "plan_approved"),
            "Stop": _NONTERMINAL, "Failed": _NONTERMINAL}


def _summary(e: Event) -> dict[str, Any]:
    if isinstance(e, (PlanProposed, PlanEdited)):
        return {"tasks": len(e.plan.tasks)}
    if isinstance(e, CandidatesProposed):
        return {"candidates": [c.id for c in e.candidates]}
    if isinstance(e, CandidateEdited):
        return {"candidate": e.candidate.id, "parent": e.candidate.parent}
    if isinstance(e, CandidateApproved):
        return {"candidate": e.candidate_id}
    if isinstance(e, VerdictReady):
        return {"candidate": e.candidate_id, "status": e.verdict.status,
                "speedup_vs_eager": e.verdict.speedup_vs_eager}
    if isinstance(e, (Finished, Stop)):
        return {"reason": e.reason}
    if isinstance(e, Failed):
        return {"message": e.message}
    if isinstance(e, AttemptFailed):
        return {"cause": e.cause, "reason": e.reason}
    return {}
