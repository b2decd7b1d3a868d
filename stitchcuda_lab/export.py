"""Export a session's best candidate as standalone files, and its LLM exchanges as training data.

    DIR/model_new.py        the candidate in KernelBench form (ModelNew + its kernel sources)
    DIR/problem.py          the reference problem, so `stitchcuda-lab verify` can re-check it
    DIR/kernels/<name>.cu   each kernel's source (.c for CPU kernels)
    DIR/verdict.json        the Verifier's verdict
    DIR/README.md           what this is, the verdict and its timings
    DIR/trajectories.jsonl  with ``trajectories=True``: one record per recorded LLM exchange,
                            failed ones included ({skill, attempt, model, messages,
                            completion, usage, outcome, error, verdict, reward}; see
                            ``trajectory_records``), and trajectories/<skill>.jsonl by skill

>>> export_session(session, "out/")   # doctest: +SKIP
PosixPath('out')
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .candidate import Candidate, KernelSource
from .errors import UsageError
from .verdict import Verdict

if TYPE_CHECKING:
    from .loop import State
    from .problem import Problem
    from .store import SessionLog


class Session(Protocol):
    """What exporting reads of a session (``session.Session`` has it; export never imports it,
    so a session can offer ``export()`` without an import circle)."""

    problem: Problem
    log: SessionLog
    state: State

    @property
    def id(self) -> str: ...

    def best(self) -> tuple[Candidate, Verdict] | None: ...

    def keeps_reference(self) -> bool: ...

    def kept_reason(self) -> str | None: ...

_EXT = {"cuda": "cu", "c": "c", "cpp": "cpp"}


def reward_tier(verdict: Verdict | None) -> int:
    """The verdict's reward, or the tier rule when the rubric gave none.

    -1 not a correct pass; 1 correct; 2 correct and >5% faster than eager; 3 also >5% faster
    than torch.compile.
    """
    if verdict is None:
        return -1
    if verdict.reward is not None:
        return int(verdict.reward)
    from .agents.rubric import reward
    return reward(verdict)


def export_session(session: Session, directory: str | os.PathLike, *,
                   trajectories: bool = False) -> Path:
    """Write the best candidate (and optionally trajectories) under ``directory``."""
    out = Path(directory)
    best = session.best()
    if best is None and not trajectories:
        raise UsageError(f"session {session.id} has no candidate that passed verification",
                         hint="nothing to export yet; `--trajectories` still exports the "
                              "recorded LLM exchanges")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if best is not None:
            write_candidate(best[0], best[1], out, problem_source=session.problem.source,
                            problem_name=session.problem.name, session_id=session.id,
                            slower=session.kept_reason() if session.keeps_reference() else None)
        else:
            (out / "README.md").write_text(
                f"# {session.problem.name}: no passing candidate\n\nSession `{session.id}` has "
                "no candidate that passed verification; only its trajectories were exported.\n")
        if trajectories:
            write_trajectories(session, out / "trajectories.jsonl")
    except OSError as e:
        raise UsageError(f"cannot export to {out}: {e.strerror or e}",
                         hint="give a folder you can write to (it is made if it does not "
                              "exist); nothing of the session was changed") from None
    return out


def write_candidate(cand: Candidate, verdict: Verdict | None, out: Path, *,
                    problem_source: str | None = None, problem_name: str = "problem",
                    session_id: str = "", slower: str | None = None) -> None:
    """model_new.py, kernels/, verdict.json and README.md for one candidate; ``slower``: why
    the session keeps the reference (this candidate is not faster than eager), said in both."""
    summary = verdict.summary() if verdict else "not verified"
    header = (f"# ModelNew for {problem_name}, exported by stitchcuda-lab"
              f"{f' from session {session_id}' if session_id else ''}.\n"
              f"# Verdict: {summary}\n"
              + (f"# Not faster than eager PyTorch ({slower}): the problem's own Model is the "
                 "faster program.\n" if slower else ""))
    (out / "model_new.py").write_text(header + cand.module_source().rstrip("\n") + "\n")
    kdir = out / "kernels"
    if cand.kernels:
        kdir.mkdir(exist_ok=True)
    for k in cand.kernels:
        (kdir / f"{k.name}.{_EXT.get(k.lang, 'txt')}").write_text(k.code.rstrip("\n") + "\n")
    if problem_source is not None:
        (out / "problem.py").write_text(problem_source)
    if verdict is not None:
        (out / "verdict.json").write_text(verdict.to_json(indent=2) + "\n")
    (out / "README.md").write_text(_readme(cand, verdict, problem_name, session_id, slower))


def _readme(cand: Candidate, verdict: Verdict | None, problem_name: str, session_id: str,
            slower: str | None = None) -> str:
    lines = [f"# {problem_name}: " + ("best passing ModelNew, not faster than eager" if slower
                                      else "optimised ModelNew"), ""]
    if slower:
        lines += [f"**The reference is kept**: {slower}. This candidate passed verification "
                  "but the problem's own `Model` is the faster program; it is exported to be "
                  "read, edited or tried elsewhere.", ""]
    lines.append(f"Candidate `{cand.id}` (iteration {cand.iteration}, written by {cand.origin})"
                 + (f", from session `{session_id}`." if session_id else "."))
    lines += ["", "## Verdict", ""]
    if verdict is None:
        lines.append("Not verified.")
    else:
        lines.append(f"**{verdict.status}** on {verdict.device}: {verdict.summary()}")
        if verdict.flags:
            lines.append(f"\nFlags: {', '.join(verdict.flags)}")
        if verdict.timings:
            lines += ["", "| measure | ms |", "|---|---|"]
            lines += [f"| {k} | {v:.4f} |" for k, v in sorted(verdict.timings.items())]
        lines.append(f"\nReward tier: {reward_tier(verdict)}")
    lines += ["", "## Kernels", ""]
    lines += [f"- `kernels/{k.name}.{_EXT.get(k.lang, 'txt')}` ({k.lang})" for k in cand.kernels]
    if not cand.kernels:
        lines.append("(none: the program calls library ops only)")
    if cand.replaced or cand.kept:
        lines += ["", f"Computes itself: {', '.join(cand.replaced) or '(nothing)'}.",
                  f"Keeps in the library: {', '.join(cand.kept) or '(nothing)'}."]
    lines += ["", "## Use", "",
              ("`model_new.py` follows the KernelBench contract: `ModelNew(*get_init_inputs())` "
               "replaces `Model`."),
              ("It imports `stitchcuda_lab.runtime` to build and launch its kernels. Re-check it "
               "with:"), "",
              "```bash", "stitchcuda-lab verify problem.py model_new.py", "```", ""]
    return "\n".join(lines)


SKILLS = ("planning", "generation", "refinement", "review")
_REWARD_FAILED = ("invalid", "repeated", "refused")    # a usable reply was asked for, none came


def trajectory_records(session: Session) -> list[dict[str, Any]]:
    """One training record per recorded LLM exchange, failed ones included, each as it was.

    An accepted coder reply carries the verdict of the candidate it produced (matched by the
    candidate id, which depends only on the code); an accepted plan the session's best verdict
    (``verdict_of: "session"``); a reply that was not accepted carries its own error and
    outcome (``invalid``, ``repeated``, ``refused``: reward -1; ``truncated`` or a broken
    stream, ``error``: no reward, since no complete answer was judged) and never the verdict
    of the reply that repaired it. ``skill`` splits the records as the StitchCUDA paper
    does: ``generation`` (a candidate from scratch), ``refinement`` (from earlier candidates
    and their feedback), ``planning``, ``review``. ``messages`` and ``completion`` are the
    conversation as sent and the answer, ready for a training pipeline.
    """
    recs = session.log.records()
    verdicts = session.state.verdicts
    final = session.best()
    final_v = final[1] if final else session.state.last_verdict()
    device = getattr(session, "device", None)
    out = []
    for i, r in enumerate(recs):
        if r.kind != "llm_exchange":
            continue
        p = r.payload
        role = p.get("role", "")
        outcome = p.get("outcome") or _legacy_outcome(p)
        ids = _candidate_ids(p, role, outcome)
        verdict, source = None, None
        if role == "coder" and outcome == "accepted":
            if not ids:   # an agent that records no candidate id: the proposal that followed
                ids = _next_proposal(recs[i + 1:])
                source = "next_proposal" if ids else None
            vs = [verdicts[c] for c in ids if c in verdicts]
            verdict = max(vs, key=lambda v: (reward_tier(v), v.speedup_vs_eager or 0.0),
                          default=None)
            source = (source or "candidate") if verdict is not None else None
        elif role == "planner" and outcome == "accepted":
            verdict, source = final_v, "session" if final_v is not None else None
        if verdict is not None:
            reward: int | None = reward_tier(verdict)
        elif outcome in _REWARD_FAILED:
            reward = -1
        else:
            reward = None
        reply = p.get("reply") or {}
        out.append({
            "session": session.id, "problem": session.problem.name, "device": device,
            "exchange": r.seq, "ask": p.get("ask"), "attempt": p.get("attempt", 1),
            "role": role, "task": p.get("task"), "iteration": p.get("iteration"),
            "skill": p.get("skill") or _legacy_skill(p, role), "sample": p.get("sample"),
            "provider": p.get("provider"), "model": p.get("model"),
            "prompt": p.get("prompt"), "messages": _messages(p), "reply": reply,
            "completion": _completion(reply),
            "usage": p.get("usage") or {}, "cost_usd": p.get("cost_usd"),
            "outcome": outcome, "error": p.get("error") or _legacy_error(p),
            "truncated": outcome == "truncated",
            "candidates": ids, "candidate_id": ids[0] if len(ids) == 1 else None,
            "verdict": _verdict_brief(verdict), "verdict_of": source, "reward": reward,
        })
    return out


def write_trajectories(session: Session, path: Path) -> int:
    """``path`` with every record, and beside it ``trajectories/<skill>.jsonl`` per skill."""
    rows = trajectory_records(session)
    _write_jsonl(path, rows)
    folder = path.with_suffix("")
    for skill in SKILLS:
        picked = [r for r in rows if r["skill"] == skill]
        if picked:
            folder.mkdir(exist_ok=True)
            _write_jsonl(folder / f"{skill}.jsonl", picked)
    return len(rows)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, sort_keys=True, default=str) + "\n" for row in rows)


def _legacy_outcome(p: dict[str, Any]) -> str:
    """The outcome of a record written before records carried one."""
    reply = p.get("reply") or {}
    stop = reply.get("stop_reason")
    if stop in ("max_tokens", "length"):
        return "truncated"
    if stop == "refusal":
        return "refused"
    if p.get("errors"):
        return "invalid"
    return "accepted"


def _legacy_error(p: dict[str, Any]) -> dict[str, Any] | None:
    errors = p.get("errors") or []
    return {"kind": _legacy_outcome(p), "message": "; ".join(errors)} if errors else None


def _legacy_skill(p: dict[str, Any], role: str) -> str:
    if role == "planner":
        return "planning"
    if role == "reviewer":
        return "review"
    user = str((p.get("prompt") or {}).get("user", ""))
    return "refinement" if ("## Baseline" in user or "## Last attempt" in user
                            or "## Your previous candidate" in user) else "generation"


def _candidate_ids(p: dict[str, Any], role: str, outcome: str) -> list[str]:
    if p.get("candidate_ids"):
        return list(p["candidate_ids"])
    if p.get("candidate_id"):
        return [p["candidate_id"]]
    data = (p.get("reply") or {}).get("input")
    if role != "coder" or outcome != "accepted" or not isinstance(data, dict):
        return []
    try:   # a submit_candidate input: its id is the candidate's (code only)
        kernels = [KernelSource(name=k["name"], lang=k["lang"], code=k["code"])
                   for k in data["kernels"]]
        return [Candidate(program=data["program"], kernels=kernels).id]
    except (KeyError, TypeError):
        return []


def _next_proposal(later: list[Any]) -> list[str]:
    for rec in later:
        if rec.kind == "llm_exchange":
            return []           # another exchange came first: no pairing by position
        if rec.kind in ("candidates_proposed", "candidate_edited"):
            cs = rec.payload.get("candidates") or [rec.payload.get("candidate")]
            return [Candidate.from_dict(c).id for c in cs if c]
    return []


def _messages(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation as it was sent: system (instructions + context), user, and for a
    repair the previous answer and the message that sent it back."""
    prompt = p.get("prompt") or {}
    system = "\n\n".join(x for x in (prompt.get("system"), prompt.get("context")) if x)
    user = str(prompt.get("user", ""))
    if prompt.get("note"):
        user += "\n\n" + prompt["note"]
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    if prompt.get("repair"):
        prev = prompt.get("previous") or {}
        answer = (json.dumps(prev["input"], sort_keys=True) if prev.get("input") is not None
                  else prev.get("text") or "")
        msgs += [{"role": "assistant", "content": answer},
                 {"role": "user", "content": prompt["repair"]}]
    return msgs


def _completion(reply: dict[str, Any]) -> dict[str, Any]:
    return {"tool": reply.get("tool"), "input": reply.get("input"), "text": reply.get("text", ""),
            "thinking": reply.get("thinking", "")}


def _verdict_brief(v: Verdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"candidate_id": v.candidate_id, "status": v.status, "reason": v.reason,
            "correct": v.correct, "speedup_vs_eager": v.speedup_vs_eager,
            "speedup_vs_compile": v.speedup_vs_compile, "max_abs_err": v.max_abs_err,
            "ours_ms": v.timings.get("ours")}
