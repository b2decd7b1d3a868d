"""Export a session's best candidate as standalone files, and its LLM exchanges as training data.

    DIR/model_new.py        the candidate in KernelBench form (ModelNew + its kernel sources)
    DIR/problem.py          the reference problem, so `stitchcuda-lab verify` can re-check it
    DIR/kernels/<name>.cu   each kernel's source (.c for CPU kernels)
    DIR/verdict.json        the Verifier's verdict
    DIR/README.md           what this is, the verdict and its timings
    DIR/trajectories.jsonl  with ``trajectories=True``: one record per recorded LLM exchange,
                            {task, role, iteration, prompt, reply, verdict, reward}

>>> export_session(session, "out/")   # doctest: +SKIP
PosixPath('out')
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .candidate import Candidate
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
    out.mkdir(parents=True, exist_ok=True)
    if best is not None:
        write_candidate(best[0], best[1], out, problem_source=session.problem.source,
                        problem_name=session.problem.name, session_id=session.id)
    else:
        (out / "README.md").write_text(
            f"# {session.problem.name}: no passing candidate\n\nSession `{session.id}` has no "
            "candidate that passed verification; only its trajectories were exported.\n")
    if trajectories:
        write_trajectories(session, out / "trajectories.jsonl")
    return out


def write_candidate(cand: Candidate, verdict: Verdict | None, out: Path, *,
                    problem_source: str | None = None, problem_name: str = "problem",
                    session_id: str = "") -> None:
    """model_new.py, kernels/, verdict.json and README.md for one candidate."""
    summary = verdict.summary() if verdict else "not verified"
    header = (f"# ModelNew for {problem_name}, exported by stitchcuda-lab"
              f"{f' from session {session_id}' if session_id else ''}.\n"
              f"# Verdict: {summary}\n")
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
    (out / "README.md").write_text(_readme(cand, verdict, problem_name, session_id))


def _readme(cand: Candidate, verdict: Verdict | None, problem_name: str, session_id: str) -> str:
    lines = [f"# {problem_name}: optimised ModelNew", ""]
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


def trajectory_records(session: Session) -> list[dict[str, Any]]:
    """One record per recorded LLM exchange, with the verdict its work led to.

    A coder exchange is paired with the candidates it produced (``candidate_id(s)`` in the
    exchange, else the next candidates proposed after it; their best verdict counts). A planner
    exchange is paired with the session's best verdict (or its last one).
    """
    recs = session.log.records()
    verdicts = session.state.verdicts
    final = session.best()
    final_v = final[1] if final else session.state.last_verdict()
    out = []
    for i, r in enumerate(recs):
        if r.kind != "llm_exchange":
            continue
        p = r.payload
        ids = list(p.get("candidate_ids") or ([p["candidate_id"]] if p.get("candidate_id")
                                               else []))
        role = p.get("role", "")
        if not ids and role != "planner":
            for later in recs[i + 1:]:
                if later.kind in ("candidates_proposed", "candidate_edited"):
                    cs = later.payload.get("candidates") or [later.payload.get("candidate")]
                    ids = [Candidate.from_dict(c).id for c in cs if c]
                    break
        if ids:
            vs = [verdicts[c] for c in ids if c in verdicts]
            verdict = max(vs, key=lambda v: (reward_tier(v), v.speedup_vs_eager or 0.0),
                          default=None)
        else:
            verdict = final_v
        out.append({
            "session": session.id, "problem": session.problem.name,
            "task": p.get("task"), "role": role, "iteration": p.get("iteration"),
            "prompt": p.get("prompt"), "reply": p.get("reply"),
            "candidates": ids,
            "verdict": _verdict_brief(verdict), "reward": reward_tier(verdict),
        })
    return out


def write_trajectories(session: Session, path: Path) -> int:
    rows = trajectory_records(session)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    return len(rows)


def _verdict_brief(v: Verdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"candidate_id": v.candidate_id, "status": v.status, "reason": v.reason,
            "correct": v.correct, "speedup_vs_eager": v.speedup_vs_eager,
            "speedup_vs_compile": v.speedup_vs_compile, "max_abs_err": v.max_abs_err}
