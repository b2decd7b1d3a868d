"""What each session of a bench run did, in order: the candidates it proposed (the variant each
one tried), their verdicts with our time beside eager's and torch.compile's, and where each
verification's time went (the Verifier's phases, the trials' sides and the sandbox's own
account). The bench's table keeps each problem's best; this keeps every try, so a reader can
see which variants a refine round reached and what a short budget cut.

    python benchmarks/sessions.py "$STITCH_SESSIONS_DIR" [--newer START_FILE] > sessions.txt

``benchmarks/kernelbench.sh`` writes it beside its results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# phases shown in this order first; the rest follow by name
FIRST = ("phase:trials", "phase:trials.candidate", "phase:trials.judge",
         "phase:trials.reference", "phase:timing", "phase:load", "build", "phase:spare")


def _ms(v) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else "-"


def _phases(timings: dict) -> str:
    keys = [k for k in FIRST if k in timings] + sorted(
        k for k in timings if k not in FIRST and (k.startswith("phase:") or k == "build"))
    return ", ".join(f"{k.removeprefix('phase:')} {timings[k]:.0f}" for k in keys
                     if isinstance(timings[k], (int, float)))


def session_lines(folder: Path) -> list[str]:
    """One session's account (``folder`` holds its events.jsonl), times from its start."""
    from stitchcuda_lab.store import SessionStore

    meta = json.loads((folder / "meta.json").read_text()) \
        if (folder / "meta.json").exists() else {}
    out = [f"== {meta.get('problem') or folder.name} ({folder.name}, "
           f"{meta.get('status', '?')})"]
    labels: dict[str, str] = {}
    start = None
    for r in SessionStore(folder.parent).open(folder).records():
        start = r.time if start is None else start
        at = f"{r.time - start:7.1f}s"
        p = r.payload
        if r.kind == "candidates_proposed":
            for c in p.get("candidates", []):
                if isinstance(c, dict):
                    labels[c.get("id", "")] = str(c.get("params", {}).get("variant", ""))
                    out.append(f"  {at} propose {c.get('id')}: {labels[c.get('id', '')]}")
        elif r.kind == "verdict_ready":
            v = p.get("verdict", {})
            t = v.get("timings", {})
            compiled = ", ".join(f"{k} {_ms(x)}" for k, x in t.items()
                                 if k.startswith("compile:") and not k.endswith("_wall"))
            why = f" ({v.get('reason')})" if v.get("reason") else ""
            out.append(f"  {at} verdict {v.get('candidate_id')}: {v.get('status')}{why}, ours "
                       f"{_ms(t.get('ours'))} ms, eager {_ms(t.get('eager'))}"
                       + (f", {compiled}" if compiled else "")
                       + f"  [{labels.get(v.get('candidate_id', ''), '')}]")
            out.append(f"           ms: {_phases(t)}")
        elif r.kind in ("attempt_failed", "failed", "finished", "stop"):
            out.append(f"  {at} {r.kind}: {json.dumps(p)[:200]}")
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sessions", type=Path, help="the sessions folder (STITCH_SESSIONS_DIR)")
    ap.add_argument("--newer", type=Path,
                    help="only sessions written to after this file was (a run's start)")
    args = ap.parse_args(argv)
    if not args.sessions.is_dir():
        print(f"{args.sessions} is not a folder: give the bench's sessions folder "
              "(STITCH_SESSIONS_DIR)", file=sys.stderr)
        return 2
    since = args.newer.stat().st_mtime if args.newer else 0.0
    for folder in sorted(args.sessions.iterdir()):
        events = folder / "events.jsonl"
        if events.exists() and events.stat().st_mtime >= since:
            print("\n".join(session_lines(folder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
