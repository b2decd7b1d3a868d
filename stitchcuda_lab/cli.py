"""The command line: ``stitchcuda-lab optimize | verify | sessions | resume | export | bench |
doctor``.

Exit codes: 0 the command did its job (also when a candidate was rejected); 2 bad input or
missing configuration (one line naming the problem, with its line where there is one); 1 an
internal error or an unavailable service (the message says which; ``--debug`` adds the
traceback).

>>> main(["optimize", "examples/mlp.py", "--device", "cpu", "--json"])   # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from .errors import BudgetExceeded, StitchError, UsageError
from .redact import redact_urls
from .settings import AGENTS, Settings
from .verdict import load_changed

PROG = "stitchcuda-lab"


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks of internal errors")
    ap = argparse.ArgumentParser(prog=PROG, description="Turn a PyTorch model into a faster "
                                 "GPU program: Planner -> Coder -> Verifier, headless.")
    ap.add_argument("--debug", action="store_true", default=False,
                    help="show tracebacks of internal errors")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("optimize", parents=[common], help="run the whole loop on a problem file")
    p.add_argument("problem", help="a .py file with Model, get_inputs, get_init_inputs")
    _run_options(p)
    p.add_argument("--agent", choices=AGENTS, default=None)
    _llm_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress log on stderr")

    p = sub.add_parser("verify", parents=[common],
                       help="verify a ModelNew file against a problem file")
    p.add_argument("problem")
    p.add_argument("candidate", help="a .py file with a ModelNew class (KernelBench form)")
    p.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("sessions", parents=[common], help="list sessions, or `sessions show ID`")
    p.add_argument("action", nargs="?", choices=("list", "show"), default="list")
    p.add_argument("id", nargs="?", help="session id (or a unique prefix) for `show`")
    p.add_argument("--out", default=None, help="sessions root (default: settings)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("resume", parents=[common], help="carry an interrupted session on")
    p.add_argument("session", help="session id, unique prefix or folder")
    p.add_argument("--out", default=None, help="sessions root (default: settings)")
    p.add_argument("--iters", type=int, default=None,
                   help="refine iterations (default: as the session was created)")
    _llm_options(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("export", parents=[common], help="write the best candidate as files")
    p.add_argument("session", help="session id, unique prefix or folder")
    p.add_argument("--to", required=True, dest="to", help="output folder")
    p.add_argument("--out", default=None, help="sessions root (default: settings)")
    p.add_argument("--trajectories", action="store_true",
                   help="also write trajectories.jsonl from the recorded LLM exchanges")

    # bench and doctor live in their own modules, imported only when asked for.
    for name, helptext in (("bench", "time a folder of problems against the baselines"),
                           ("doctor", "check the environment and say what to fix")):
        p = sub.add_parser(name, help=helptext, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
    return ap


def _llm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM agents")
    g.add_argument("--model", default=None,
                   help="model name (a Claude model, or what a local server serves)")
    g.add_argument("--base-url", default=None, dest="base_url",
                   help="a server speaking the Messages API (claude agent: vLLM, Ollama, "
                        "llama.cpp) or chat completions (openai agent); see docs/LOCAL_MODELS.md")
    g.add_argument("--candidates", type=int, default=None, metavar="K",
                   help="candidates sampled per iteration (default 1)")
    g.add_argument("--max-cost", type=float, default=None, dest="max_cost", metavar="USD",
                   help="no LLM request starts once the session has spent this much")
    g.add_argument("--max-tokens", type=int, default=None, dest="max_total_tokens",
                   metavar="N", help="the same cap in tokens (input + output, the session's "
                                     "total; STITCH_MAX_TOKENS is one reply's budget)")


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N")
    p.add_argument("--iters", type=int, default=None, help="refine iterations after the first")
    p.add_argument("--out", default=None, help="sessions root (default: settings)")


# ----------------------------------------------------------------------------- entry


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (the console script exits with it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if first is not None and argv[first] in ("bench", "doctor"):
        # Their options belong to their own modules: hand everything after the name over.
        args = argparse.Namespace(command=argv[first], rest=argv[first + 1:],
                                  debug="--debug" in argv[:first])
    else:
        args = build_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    try:
        return int(COMMANDS[args.command](args) or 0)
    except UsageError as e:
        _error(e.one_line(), debug)
        return 2
    except StitchError as e:
        _error(e.one_line(), debug)
        return 1
    except KeyboardInterrupt:
        _error("interrupted", debug)
        return 130
    except BrokenPipeError:          # `stitchcuda-lab sessions | head`: the reader left
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no more writes to the pipe
        return 0
    except Exception as e:  # noqa: BLE001 - the CLI turns every bug into one line + exit 1
        _error(f"internal error: {type(e).__name__}: {e}"
               + ("" if debug else " (run with --debug for the traceback)"), debug)
        return 1


def _error(message: str, debug: bool) -> None:
    if debug:
        print(redact_urls(traceback.format_exc()), file=sys.stderr, end="")
    print(f"{PROG}: error: {redact_urls(message)}", file=sys.stderr)


def exit_code(e: BaseException) -> int:
    """0 a cap stopped the run cleanly, 2 bad input or configuration, 1 anything else."""
    if isinstance(e, BudgetExceeded):
        return 0
    return 2 if isinstance(e, UsageError) else 1


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    over = {"sessions_dir": getattr(args, "out", None), "device": getattr(args, "device", None),
            "iters": getattr(args, "iters", None), "agent": getattr(args, "agent", None)}
    for name in ("model", "base_url", "candidates", "max_cost", "max_total_tokens"):
        over[name] = getattr(args, name, None)
    over.update(extra)
    return Settings.from_env(**{k: v for k, v in over.items() if v is not None})


def _progress_printer(quiet: bool):
    if quiet:
        return None

    def show(message: str, fraction: float | None) -> None:
        pct = f"[{fraction:4.0%}] " if fraction is not None else "       "
        print(redact_urls(f"{pct}{message}"), file=sys.stderr, flush=True)
    return show


# ----------------------------------------------------------------------------- optimize


def cmd_optimize(args: argparse.Namespace) -> int:
    from .session import Session

    settings = _settings(args)
    _check_llm_options(settings)
    # A file from disk may loop forever at import: validated in a process of its own.
    session = Session.create(args.problem, settings, isolate=True, time_forward=True,
                             on_progress=_progress_printer(args.quiet))
    return _drive(session, args, session.report)


def _drive(session: Any, args: argparse.Namespace, report: Any = None) -> int:
    """Run the session to its end; whatever stops it, print the result (one JSON object with
    ``--json``) with the error, and leave the session resumable."""
    error: StitchError | None = None
    try:
        session.advance(auto=True)
    except StitchError as e:
        error = e          # reported with the honest baseline and the session folder
    except Exception as e:  # noqa: BLE001 - a bug still leaves one result and a resumable session
        if getattr(args, "debug", False):
            print(redact_urls(traceback.format_exc()), file=sys.stderr, end="")
        error = StitchError(f"internal error: {type(e).__name__}: {e}",
                            hint="run with --debug for the traceback; `resume` carries it on")
    finally:
        session.close()
    _print_result(optimize_result(session, problem_report=report, error=error), args.json)
    if error is None:
        return 0
    if isinstance(error, BudgetExceeded):
        print(f"{PROG}: stopped: {redact_urls(error.one_line())}", file=sys.stderr)
    else:
        print(f"{PROG}: error: {redact_urls(error.one_line())}", file=sys.stderr)
    return exit_code(error)


def _check_llm_options(settings: Any) -> None:
    if settings.candidates < 1:
        raise UsageError(f"--candidates must be 1 or more, got {settings.candidates}")
    if settings.max_cost is not None and settings.max_cost < 0:
        raise UsageError(f"--max-cost must be 0 or more, got {settings.max_cost:g}")
    if settings.max_total_tokens is not None and settings.max_total_tokens < 0:
        raise UsageError(f"--max-tokens must be 0 or more, got {settings.max_total_tokens}")


def optimize_result(session: Any, problem_report: Any = None,
                    error: StitchError | None = None) -> dict[str, Any]:
    """The JSON-able summary of a session that ``optimize --json`` prints."""
    from .export import reward_tier

    st = session.state
    best = session.best()
    verdicts = list(st.verdicts.values())
    bv = best[1] if best else None
    timed = bv or next((v for v in reversed(verdicts) if v.timings.get("eager")), None)
    eager_ms = timed.timings.get("eager") if timed else None
    eager_source = "verifier" if eager_ms is not None else None
    if eager_ms is None and session.graph is not None and session.graph.eager_ms:
        eager_ms, eager_source = session.graph.eager_ms, "graph profile"
    if eager_ms is None and problem_report is not None and problem_report.eager_ms:
        eager_ms, eager_source = problem_report.eager_ms, "validation run"
    if error is not None:
        status = "stopped" if isinstance(error, BudgetExceeded) else "error"
    elif bv is not None:
        status = bv.status
    elif verdicts:
        status = verdicts[-1].status
    else:
        status = "no_candidate"
    tasks = []
    for t in (st.plan.tasks if st.plan else []):
        tstatus = t.status
        if t.status == "approved" and t.kind != "keep" and st.finished and verdicts:
            tstatus = "done" if bv is not None else "failed"
        tasks.append({"id": t.id, "kind": t.kind, "status": tstatus, "ops": list(t.ops),
                      "reason": t.reason})
    warnings = list(session.graph.warnings) if session.graph is not None else []
    if problem_report is not None:
        warnings += list(problem_report.warnings)
    return {
        "status": status,
        "correct": bool(bv and bv.correct),
        "speedup_vs_eager": bv.speedup_vs_eager if bv else None,
        "speedup_vs_compile": bv.speedup_vs_compile if bv else None,
        "kept_reference": session.keeps_reference(),
        "kept_reason": session.kept_reason(),
        "eager_ms": eager_ms,
        "eager_ms_source": eager_source,
        "ours_ms": bv.timings.get("ours") if bv else None,
        "compile_ms": bv.timings.get("compile:default") if bv else None,
        "reward": reward_tier(bv) if bv else (-1 if verdicts else None),
        "rubric": ({k: v for k, v in bv.rubric.items() if k != "reward"} if bv else None),
        "best_candidate": best[0].id if best else None,
        "max_abs_err": bv.max_abs_err if bv else None,
        "flags": list(bv.flags) if bv else [],
        "tasks": tasks,
        "iterations": st.iteration,
        "candidates": [{"id": cid, "iteration": c.iteration,
                        "status": st.verdicts[cid].status if cid in st.verdicts else None,
                        "speedup_vs_eager": st.verdicts[cid].speedup_vs_eager
                        if cid in st.verdicts else None}
                       for cid, c in st.candidates.items()],
        "phase": st.phase,
        "message": redact_urls(error.message if error is not None else st.message),
        "error": _error_dict(error),
        "failures": [dict(f) for f in st.failures],
        "spend": session.spend().to_dict() if hasattr(session, "spend") else None,
        "problem": session.problem.name,
        "device": session.device,
        "agent": session.agent,
        "session_id": session.id,
        "session_dir": str(session.dir),
        "warnings": warnings,
    }


def _error_dict(error: StitchError | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"type": type(error).__name__, "message": redact_urls(error.message),
            "hint": redact_urls(error.hint) if error.hint else None,
            "exit_code": exit_code(error)}


def _print_result(r: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(redact_urls(json.dumps(r, default=str)))
        return
    print(f"problem   {r['problem']} on {r['device']} ({r['agent']} agent)")
    print(f"session   {r['session_dir']}")
    for t in r["tasks"]:
        print(f"task      {t['id']}: {t['kind']} [{t['status']}] {', '.join(t['ops'])}")
    eager = f"{r['eager_ms']:.3f} ms" if r["eager_ms"] is not None else "not measured"
    print(f"eager     {eager}" + (f" ({r['eager_ms_source']})" if r["eager_ms_source"] else ""))
    if r["best_candidate"]:
        sc = r["speedup_vs_compile"]
        print(f"best      {r['best_candidate']}: {r['status']}, "
              f"{r['ours_ms']:.3f} ms" if r["ours_ms"] is not None else
              f"best      {r['best_candidate']}: {r['status']}")
        print(f"speedup   {r['speedup_vs_eager']:.2f}x vs eager"
              if r["speedup_vs_eager"] is not None else "speedup   not measured",
              end="")
        print(f", {sc:.2f}x vs torch.compile" if sc is not None else "")
        if r["kept_reference"]:
            print("result    no candidate beat eager: keep the reference program")
        if load_changed(r.get("flags")):
            print("note      the host's load changed while it was timed: these ratios compare "
                  "two loads; run it again on a steady host")
    else:
        print(f"result    no passing candidate ({r['status']}); the model stays as it is")
    if r.get("kept_reason"):
        print(f"kept      {r['kept_reason']}")
    spend = r.get("spend") or {}
    if spend.get("exchanges"):
        from .spend import Usage
        u = Usage(input_tokens=spend["input_tokens"], cache_write_tokens=spend["cache_write_tokens"],
                  cache_read_tokens=spend["cache_read_tokens"], output_tokens=spend["output_tokens"],
                  cost_usd=spend["cost_usd"], exchanges=spend["exchanges"],
                  unpriced=spend["unpriced_exchanges"])
        print(f"spend     {u.line()} over {u.exchanges} exchange(s)")
    if r["message"]:
        print(f"note      {r['message']}")
    for w in r["warnings"]:
        print(f"warning   {w}")


# ----------------------------------------------------------------------------- verify


def cmd_verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .problem import load_problem, validate
    from .verifier.worker import resolve_device, verify_files

    settings = _settings(args)
    problem = load_problem(args.problem)
    if not Path(args.candidate).is_file():
        raise UsageError(f"candidate file {args.candidate!r} does not exist")
    device = resolve_device(settings.device)
    validate(problem, device=device, seed=settings.seed, timeout=settings.timeout,
             time_forward=False)
    verdict = verify_files(args.problem, args.candidate, device, settings)
    from .export import reward_tier
    d = verdict.to_dict()
    d["reward"] = reward_tier(verdict)
    if args.json:
        print(json.dumps(d, default=str))
    else:
        print(f"{Path(args.candidate).name}: {verdict.summary()}")
        for k, v in sorted(verdict.timings.items()):
            print(f"  {k:<24} {v:.4f} ms")
        for f in verdict.flags:
            print(f"  flag: {f}")
        if verdict.build_log:
            print(verdict.build_log[-2000:])
    return 0


# ----------------------------------------------------------------------------- sessions


def cmd_sessions(args: argparse.Namespace) -> int:
    from .store import SessionStore
    settings = _settings(args)
    if args.action == "show":
        if not args.id:
            raise UsageError("`sessions show` needs a session id",
                             hint="list them with `stitchcuda-lab sessions`")
        return _show(args, settings)
    rows = SessionStore(settings.sessions_dir).list()
    if args.json:
        print(json.dumps(rows, default=str))
        return 0
    if not rows:
        print(f"no sessions under {settings.sessions_dir}")
        return 0
    print(f"{'id':<44} {'status':<12} {'problem':<20} {'device':<6} {'best':>8}  created")
    for m in rows:
        sp = m.get("speedup_vs_eager")
        best = f"{sp:.2f}x" if isinstance(sp, (int, float)) else "-"
        print(f"{m['id']:<44} {m.get('status', '?'):<12} {m.get('problem', '?')!s:<20} "
              f"{m.get('device', '?')!s:<6} {best:>8}  {m.get('created', '')}")
    return 0


def _show(args: argparse.Namespace, settings: Any) -> int:
    from .session import Session
    s = Session.open(args.id, settings, lock=False)
    info = s.log.info()
    st = s.state
    if args.json:
        print(json.dumps({"meta": info, "state": st.to_dict(),
                          "result": optimize_result(s)}, default=str))
        return 0
    print(f"session   {s.id}  [{info['status']}]")
    print(f"folder    {s.dir}")
    print(f"problem   {s.problem.name} ({s.problem.origin}) on {s.device}, {s.agent} agent")
    print(f"phase     {st.phase}, iteration {st.iteration}, needs {st.needs}")
    if st.plan:
        print(str(st.plan))
    for cid, c in st.candidates.items():
        v = st.verdicts.get(cid)
        mark = "*" if cid == st.best else " "
        print(f" {mark} {cid} (iteration {c.iteration}, {c.origin}): "
              f"{v.summary() if v else 'not verified'}")
    if st.message:
        print(f"note      {st.message}")
    print(f"events    {info['events']} (last: {info['last_event']})")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from .session import Session
    settings = _settings(args)
    _check_llm_options(settings)
    say = _progress_printer(args.quiet)
    s = Session.open(args.session, settings, iters=args.iters, on_progress=say)
    if s.state.finished:
        if say:
            say(f"session {s.id} has already finished ({s.state.phase})", None)
        s.close()
        _print_result(optimize_result(s), args.json)
        return 0
    if say:
        say(f"resuming {s.id} at {s.state.phase} (needs {s.state.needs})", None)
    return _drive(s, args)


def cmd_export(args: argparse.Namespace) -> int:
    from .session import Session
    settings = _settings(args)
    s = Session.open(args.session, settings, lock=False)
    out = s.export(args.to, trajectories=args.trajectories)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    print(f"exported {s.id} to {out}: {', '.join(files)}")
    return 0


# ----------------------------------------------------------------------------- bench, doctor


def _lazy_command(module: str, func: str, prog: str):
    def run(args: argparse.Namespace) -> int:
        mod = importlib.import_module(f"stitchcuda_lab.{module}")
        entry = getattr(mod, func)
        p = argparse.ArgumentParser(prog=f"{PROG} {prog}")
        p.add_argument("--debug", action="store_true")
        if hasattr(mod, "add_arguments"):
            mod.add_arguments(p)
        else:
            p.add_argument("--json", action="store_true")
        sub_args = p.parse_args(args.rest)
        return int(entry(sub_args) or 0)
    return run


COMMANDS = {
    "optimize": cmd_optimize, "verify": cmd_verify, "sessions": cmd_sessions,
    "resume": cmd_resume, "export": cmd_export,
    "bench": _lazy_command("bench", "main_bench", "bench"),
    "doctor": _lazy_command("doctor", "main_doctor", "doctor"),
}


if __name__ == "__main__":
    sys.exit(main())
