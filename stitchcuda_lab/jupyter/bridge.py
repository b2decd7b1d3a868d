"""What the notebook asks of a Session: read its state, post a person's events.

The panel and the magics talk to the Session only through these functions, so the view never
reaches into the loop's internals and one file follows the Session contract
(docs/CONTRACTS.md, "Session").
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from ..candidate import Candidate
from ..plan import Plan
from ..verdict import Verdict, load_changed

# ---- reading --------------------------------------------------------------------------------

def phase(session: Any) -> str:
    """The loop's phase (``loop.PHASES``: planned, coded, verified, done, stopped, failed ...)."""
    return str(getattr(session.state, "phase", "") or "")


def needs(session: Any) -> str | None:
    """What the loop waits for (``approve_plan``, ``approve_candidate``, ``next``) or None."""
    return getattr(session.state, "needs", None)


def plan(session: Any) -> Plan | None:
    return getattr(session.state, "plan", None)


def candidates(session: Any) -> list[Candidate]:
    """Every candidate in arrival order."""
    cs = getattr(session.state, "candidates", None) or {}
    return list(cs.values()) if isinstance(cs, dict) else list(cs)


def verdicts(session: Any) -> dict[str, Verdict]:
    return dict(getattr(session.state, "verdicts", None) or {})


def pending(session: Any) -> list[str]:
    """Candidate ids proposed and awaiting a person's approval."""
    return list(getattr(session.state, "pending", None) or [])


def verdict_for(session: Any, candidate: Candidate | None) -> Verdict | None:
    if candidate is None:
        return None
    return verdicts(session).get(candidate.id)


def previous(session: Any, candidate: Candidate) -> Candidate | None:
    """The version this candidate came from (its parent), else the one before it."""
    cs = candidates(session)
    by_id = {c.id: c for c in cs}
    if candidate.parent and candidate.parent in by_id:
        return by_id[candidate.parent]
    idx = next((i for i, c in enumerate(cs) if c.id == candidate.id), None)
    return cs[idx - 1] if idx else None


def history(session: Any) -> list[dict[str, Any]]:
    """One point per verified candidate, in order: iteration, speedups, status, id."""
    vs = verdicts(session)
    out = []
    for c in candidates(session):
        v = vs.get(c.id)
        if v is None:
            continue
        ok = v.status == "pass"
        out.append({"iteration": c.iteration, "candidate_id": c.id, "status": v.status,
                    "origin": c.origin, "steady": not load_changed(v.flags),
                    "speedup_vs_eager": v.speedup_vs_eager if ok else None,
                    "speedup_vs_compile": v.speedup_vs_compile if ok else None})
    return out


def drafts(session: Any) -> dict[str, dict[str, str]]:
    """Kernel text typed and neither verified nor discarded, kept in the session folder
    (none for a session object without a folder of its own)."""
    fn = getattr(session, "drafts", None)
    return fn() if callable(fn) else {}


def save_drafts(session: Any, typed: dict[str, dict[str, str]]) -> None:
    fn = getattr(session, "save_drafts", None)
    if callable(fn):
        fn(typed)


def superseded(session: Any) -> str:
    """Why this session object no longer drives its session ("" while it does)."""
    return str(getattr(session, "superseded", "") or "")


def is_done(session: Any) -> bool:
    from ..loop import TERMINAL
    return phase(session) in TERMINAL


def error(session: Any) -> str | None:
    """Why the loop failed (the Failed event's message), else None."""
    if phase(session) == "failed":
        return getattr(session.state, "message", "") or "the session failed"
    return None


def message(session: Any) -> str:
    return str(getattr(session.state, "message", "") or "")


def failures(session: Any) -> list[dict[str, Any]]:
    """The iterations that failed without ending the session (AttemptFailed), in order: each
    {"iteration", "cause", "reason"}."""
    return [dict(f) for f in getattr(session.state, "failures", [])]


# ---- events ---------------------------------------------------------------------------------

def approve_plan(session: Any, edited: Plan | None = None) -> Any:
    """Approve the plan, with a person's edits (statuses, order, technique, params) if any."""
    from .. import loop
    current = plan(session)
    if edited is not None and current is not None and edited.to_dict() != current.to_dict():
        session.post(loop.PlanEdited(plan=edited))
    return session.post(loop.PlanApproved())


def approve_candidate(session: Any, candidate: Candidate) -> Any:
    from .. import loop
    return session.post(loop.CandidateApproved(candidate_id=candidate.id))


def edited(candidate: Candidate, edits: dict[str, str]) -> Candidate:
    """A person's edit as its own version: ``candidate`` with the kernels in ``edits``
    (name -> code) replaced, ``parent`` = ``candidate.id``, origin ``user``.

    The id comes from the parent and the code together, so an edit that puts back code an
    earlier version had (fixing a slip) is still a new version under the one it fixes, and
    versions form a tree: a child's id is never one of its ancestors'.
    """
    names = {k.name for k in candidate.kernels}
    unknown = sorted(set(edits) - names)
    if unknown:
        from ..errors import UsageError
        raise UsageError(f"candidate {candidate.id} has no kernel {unknown[0]!r}",
                         hint=f"kernels are: {', '.join(sorted(names)) or '(none)'}")
    kernels = [dataclasses.replace(k, code=edits[k.name]) if k.name in edits else k
               for k in candidate.kernels]
    params = {**candidate.params, "edited_kernels": sorted(edits)}
    c = dataclasses.replace(candidate, id="x", kernels=kernels, parent=candidate.id,
                            origin="user", params=params,
                            notes=f"hand edit of {candidate.id} ({', '.join(sorted(edits))})")
    c.id = hashlib.sha256(f"{candidate.id}\0{c.digest()}".encode()).hexdigest()[:12]
    return c


def edit_kernel(session: Any, candidate: Candidate, name: str, code: str) -> Candidate:
    """Post a person's kernel edit as a new version (``edited``); the loop verifies it."""
    new = edited(candidate, {name: code})
    post_edited(session, new)
    return new


def post_edited(session: Any, edited: Candidate) -> Any:
    """Post an edited candidate and approve it, so the next advance verifies it."""
    from .. import loop
    session.post(loop.CandidateEdited(candidate=edited))
    return session.post(loop.CandidateApproved(candidate_id=edited.id))


def approve_pending(session: Any) -> Any:
    """Approve every candidate awaiting approval (so the next advance verifies them)."""
    from .. import loop
    for cid in pending(session):
        session.post(loop.CandidateApproved(candidate_id=cid))
    return session.state


def next_iteration(session: Any) -> Any:
    """One more iteration, start to verdict: candidates still awaiting approval are approved
    (they are this iteration's); once everything is verified, the Coder writes the next round
    from the verdicts and its candidates are approved for verification."""
    from .. import loop
    if phase(session) in ("coded", "candidate_approved"):
        return approve_pending(session)
    if phase(session) in ("new", "plan_approved", "refining"):
        return session.state       # work left over (a restart, an error): the advance does it
    session.post(loop.NextIteration())
    session.advance()                  # the Coder's next round; stops for approval
    if phase(session) == "coded":
        approve_pending(session)
    return session.state


def regenerate(session: Any) -> Any:
    """Set the waiting candidates aside and ask the Coder again at the same iteration."""
    from .. import loop
    session.post(loop.Regenerate())
    session.advance()                  # the Coder's new candidates; stops for approval
    return session.state


def stop(session: Any, reason: str = "stopped from the notebook") -> Any:
    from .. import loop
    return session.post(loop.Stop(reason=reason))
