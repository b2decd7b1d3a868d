"""The LLM Coder: an approved plan and the attempts so far in; Candidates out.

The system prompt teaches the runtime contract (prompts/runtime.md); the cached context holds
the problem, graph, hardware, eager profile and retrieved sections; the user turn holds the plan
and the memory of the session (``attempts``, from ``loop.State.attempts``):

- the baseline: the best passing candidate so far, its code and measured time;
- the last attempt when it failed, its code and the Verifier's full feedback (compiler log,
  where the outputs differ, timings, profile, hardware counters), so a failure goes back;
- the attempts so far, newest first, as one line each (strategy, verdict, time), within
  ``Settings.memory_tokens``, and the failures grouped by cause.

``Settings.candidates`` (``--candidates K``) samples K candidates per iteration, each told the
strategies of the samples before it. A reply is checked (program parses, ModelNew defined,
every kernel loaded, the device's kernel language) and compared with every earlier candidate:
one identical to an earlier candidate goes back to the model with that candidate's verdict.
The exchange records carry the skill (``generation`` from scratch, ``refinement`` from
feedback), the sample number and the candidate id.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...candidate import Candidate, KernelSource
from ...errors import ReplyError
from ...plan import Plan
from ...verdict import Verdict
from ..rubric import grouped_loads
from .context import fence, lang_for, problem_context, prompt, rag_query, retrieve
from .planner import _UNSET, KnowledgeMixin
from .schema import CANDIDATE_SCHEMA
from .structured import Request, StructuredClient, Tool

if TYPE_CHECKING:
    from ...graph import Graph
    from ...loop import Attempt
    from ...problem import Problem
    from ...settings import Settings

CANDIDATE_TOOL = Tool(
    "submit_candidate",
    "Submit the kernels and the ModelNew program that calls them through the runtime.",
    CANDIDATE_SCHEMA)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LOG_CHARS = 6000
CHARS_PER_TOKEN = 4      # budget arithmetic for the memory (English and code, roughly)


class LLMCoder(KnowledgeMixin):
    """``Coder`` backed by a structured LLM client; runs to ``--iters`` (no early stop)."""

    stops_early = False     # a flat iteration is no reason to stop sampling

    def __init__(self, client: StructuredClient, *, knowledge: Any = _UNSET,
                 name: str | None = None):
        self.client = client
        self.name: str = name or str(getattr(client, "origin", client.provider))
        if knowledge is not _UNSET:
            self.knowledge = knowledge

    def code(self, problem: Problem, graph: Graph, plan: Plan, settings: Settings, *,
             iteration: int, previous: Candidate | None = None,
             feedback: Verdict | None = None,
             attempts: Sequence[Attempt] | None = None) -> list[Candidate]:
        """``settings.candidates`` candidates; raises ``ReplyError`` when none could be had."""
        memory = Memory.of(attempts, previous, feedback)
        tasks = plan.active()
        words = " ".join(dict.fromkeys(w for t in tasks for w in (t.kind.replace("_", " "),
                                                                   t.technique) if w))
        sections = retrieve(self.knowledge, rag_query(graph, words), settings.rag_top_k, graph)
        ids = [s["id"] for s in sections]
        lang = lang_for(graph.device)
        context = problem_context(problem, graph, sections, self.session_facts())
        parent = memory.parent()
        skill = "refinement" if memory.has_code() else "generation"
        k = max(1, settings.candidates)
        out: list[Candidate] = []
        failures: list[ReplyError] = []
        for sample in range(k):
            taken = {c.id: c for c in out}
            request = Request(
                role="coder", task=",".join(t.id for t in tasks) or "plan", iteration=iteration,
                system=prompt("coder") + "\n\n" + prompt("runtime"), context=context,
                user=coder_request(plan, lang, iteration, memory, settings.memory_tokens,
                                   sample=(sample, k, out)),
                tool=CANDIDATE_TOOL, refs=ids, check=lambda data: check_candidate(data, lang),
                repeat=functools.partial(memory.repeats, taken=taken),
                annotate=lambda data: {"candidate_id": candidate_from_reply(data).id},
                meta={"skill": skill, "sample": sample, "samples": k})
            try:
                reply = self.client.ask(request)
            except ReplyError as e:     # this sample failed; the others may not
                failures.append(e)
                continue
            cand = candidate_from_reply(reply.data, iteration=iteration, parent=parent,
                                        origin=self.name)
            cand.params.update({"refs": ids, "model": reply.model, "skill": skill})
            out.append(cand)
        if not out:
            last = failures[-1]
            raise ReplyError(last.message if k == 1 else
                             f"none of the {k} samples gave a usable candidate; last: "
                             f"{last.message}", kind=last.kind, hint=last.hint)
        return out


class Memory:
    """What the coder is told about earlier attempts (built from ``loop.Attempt`` records)."""

    def __init__(self, attempts: Sequence[Attempt]):
        self.attempts = list(attempts)
        passed = [a for a in self.attempts if a.verdict is not None and a.verdict.status == "pass"
                  and a.verdict.correct]
        self.best = max(passed, key=lambda a: (a.verdict and a.verdict.speedup_vs_eager) or 0.0,
                        default=None)
        judged = [a for a in self.attempts if a.verdict is not None or a.failure]
        self.last = judged[-1] if judged else None

    @classmethod
    def of(cls, attempts: Sequence[Attempt] | None, previous: Candidate | None,
           feedback: Verdict | None) -> Memory:
        """From the session's attempts; a caller with only ``previous``/``feedback`` gets the
        same prompt from those two."""
        if attempts is not None:
            return cls(attempts)
        from ...loop import Attempt
        if previous is None:
            return cls([])
        return cls([Attempt(iteration=previous.iteration, candidate=previous, verdict=feedback)])

    def has_code(self) -> bool:
        return any(a.candidate is not None for a in self.attempts)

    def parent(self) -> str | None:
        """The candidate a new one builds on: the last failed one when it failed, else the best."""
        if self.last is not None and self.last.candidate is not None and self.last is not self.best:
            return self.last.candidate.id
        if self.best is not None and self.best.candidate is not None:
            return self.best.candidate.id
        with_code = [a.candidate for a in self.attempts if a.candidate is not None]
        return with_code[-1].id if with_code else None

    def repeats(self, data: dict[str, Any], taken: dict[str, Candidate]) -> str | None:
        """Why this reply is not new (an earlier candidate, or a sample of this iteration)."""
        cid = candidate_from_reply(data).id
        if cid in taken:
            return (f"this candidate is identical to sample {list(taken).index(cid) + 1} of this "
                    "iteration; submit a different one (another strategy, not a copy)")
        for a in self.attempts:
            if a.candidate is not None and a.candidate.id == cid:
                seen = a.verdict.summary() if a.verdict is not None else "not verified yet"
                return (f"this candidate is identical to candidate {cid} of iteration "
                        f"{a.iteration} ({seen}); submitting it again teaches nothing. Submit a "
                        "different candidate: change the kernels or the program")
        return None


def candidate_from_reply(data: dict[str, Any], *, iteration: int = 0, parent: str | None = None,
                         origin: str = "claude") -> Candidate:
    """A validated submit_candidate input as a Candidate (its id depends only on the code)."""
    kernels = [KernelSource(name=k["name"], lang=k["lang"], code=k["code"], entry=list(k["entry"]))
               for k in data["kernels"]]
    return Candidate(program=data["program"], kernels=kernels, iteration=iteration, parent=parent,
                     origin=origin, notes=data.get("notes", ""), replaced=list(data["replaced"]),
                     kept=list(data["kept"]))


def check_candidate(data: dict[str, Any], lang: str) -> list[str]:
    """Checks the schema cannot express; each message tells the model what to fix."""
    errors: list[str] = []
    names = [k["name"] for k in data["kernels"]]
    for i, k in enumerate(data["kernels"]):
        where = f"$.kernels[{i}]"
        if not _IDENT.match(k["name"]):
            errors.append(f"{where}.name: {k['name']!r} is not an identifier")
        if names.count(k["name"]) > 1:
            errors.append(f"{where}.name: duplicate kernel name {k['name']!r}")
        if k["lang"] != lang:
            errors.append(f"{where}.lang: the device needs lang {lang!r}, not {k['lang']!r}")
        for fn in k["entry"]:
            if not re.search(rf"\b{re.escape(fn)}\s*\(", k["code"]):
                errors.append(f"{where}.entry: {fn!r} is not defined in the code")
        if k["lang"] == "cuda" and "__global__" not in k["code"]:
            errors.append(f"{where}.code: CUDA entry points must be extern \"C\" __global__")
    try:
        tree = ast.parse(data["program"])
    except SyntaxError as e:
        return errors + [f"$.program: SyntaxError at line {e.lineno}: {e.msg}"]
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        errors.append("$.program: no class ModelNew")
    loaded: set[object] = {n.slice.value for n in ast.walk(tree) if isinstance(n, ast.Subscript)
              and isinstance(n.value, ast.Name) and n.value.id == "SOURCES"
              and isinstance(n.slice, ast.Constant)}
    # and those a program of many kernels loads in shared builds, as the offline coder's does
    # (``runtime.load_group(SOURCES, group, ...)``)
    loaded |= grouped_loads(list(ast.walk(tree)))
    for name in names:
        if name not in loaded:
            errors.append(f"$.program: kernel {name!r} is never loaded "
                          f"(runtime.load(SOURCES[{name!r}], lang=LANGS[{name!r}], name={name!r}))")
    for name in sorted(loaded - set(names), key=str):     # SOURCES[0] is no str
        errors.append(f"$.program: SOURCES[{name!r}] has no kernel of that name")
    assigned = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    if assigned & {"SOURCES", "LANGS"}:
        errors.append("$.program: do not define SOURCES or LANGS; the workbench adds them")
    return errors


# ----------------------------------------------------------------------------- the user turn


def coder_request(plan: Plan, lang: str, iteration: int, memory: Memory,
                  memory_tokens: int = 3000,
                  sample: tuple[int, int, Sequence[Candidate]] = (0, 1, ())) -> str:
    """This turn's message: the plan, the baseline, the last failure, the attempts, the ask."""
    parts = ["## Approved plan", *plan_lines(plan)]
    best, last = memory.best, memory.last
    failed_last = last is not None and last is not best and bool(
        last.failure or (last.verdict is not None and last.verdict.status != "pass"))
    # an attempt's verdict comes with its candidate; best passed, so it has both
    if best is not None and best.candidate is not None and best.verdict is not None:
        v = best.verdict
        parts += [f"## Baseline: candidate {best.candidate.id} (iteration {best.iteration}), "
                  f"the best that passed: {_timing(v)}",
                  *candidate_blocks(best.candidate)]
        if not failed_last:
            parts += ["### Verifier feedback on the baseline", feedback_text(v)]
    if (failed_last and last is not None and last.candidate is not None
            and last.verdict is not None):
        parts += [f"## Last attempt: candidate {last.candidate.id} (iteration {last.iteration}) "
                  f"failed: {last.verdict.status}", *candidate_blocks(last.candidate),
                  "### Verifier feedback", feedback_text(last.verdict)]
    elif failed_last and last is not None:
        parts += [f"## Last attempt (iteration {last.iteration}) produced no candidate "
                  f"({last.cause})", last.failure]
    history = attempts_text(memory.attempts, memory_tokens * CHARS_PER_TOKEN)
    if history:
        parts += ["## Attempts so far (newest first)", history]
    causes = failures_text(memory.attempts)
    if causes:
        parts += ["## Failures by cause", causes]
    parts += ["## Request", _ask(iteration, lang, memory, failed_last)]
    index, total, before = sample
    if total > 1:
        line = f"This is sample {index + 1} of {total} for this iteration"
        if before:
            tried = "; ".join(f"{c.id}: {_first_line(c.notes) or 'no notes'}" for c in before)
            line += f". Earlier samples took these approaches, take a different one: {tried}"
        parts.append(line + ".")
    return "\n\n".join(parts)


def _ask(iteration: int, lang: str, memory: Memory, failed_last: bool) -> str:
    best, last = memory.best, memory.last
    if not memory.attempts:
        return (f"Iteration {iteration}: write the first candidate for every task above, kernels "
                f"in lang {lang!r}. Call submit_candidate.")
    tail = ("Do not resubmit any candidate listed above. Say what you changed in `notes`. Call "
            "submit_candidate with the complete candidate.")
    if failed_last and last is not None:
        status = last.verdict.status if last.verdict is not None else last.cause
        fix = ("fix it from the feedback" if last.candidate is not None
               else "write a complete, valid candidate")
        base = (" or start again from the baseline, which passed" if best is not None else "")
        return (f"Iteration {iteration}: the last attempt failed ({status}). Find the cause and "
                f"{fix}{base}. Check the failures by cause: do not repeat them. {tail}")
    if best is not None:
        return (f"Iteration {iteration}: the baseline is correct ({_timing(best.verdict)}). Make "
                "it faster without losing correctness: use the profile and the hardware figures; "
                f"try what the attempts above have not. {tail}")
    return (f"Iteration {iteration}: no candidate has passed yet. Write a correct one first. "
            f"{tail}")


def plan_lines(plan: Plan) -> list[str]:
    lines = []
    for t in plan.active():
        line = f"- {t.id} {t.kind}: nodes {', '.join(t.ops)}"
        if t.targets:
            line += f" ({', '.join(t.targets)})"
        line += f"; share {t.share:.0%}"
        if t.technique:
            line += f"; how: {t.technique}"
        if t.reason:
            line += f"; why: {t.reason}"
        if t.params:
            line += f"; params {json.dumps(t.params, sort_keys=True)}"
        lines.append(line)
    kept = [t for t in plan.tasks if t.kind == "keep" or t.status == "skipped"]
    if kept:
        lines.append("Left to the library (list their targets in `kept`):")
        lines += [f"- {t.id}: {', '.join(t.targets or t.ops)} ({t.reason})" for t in kept]
    return lines


def candidate_blocks(c: Candidate) -> list[str]:
    out = []
    for k in c.kernels:
        out += [f"### kernel `{k.name}` ({k.lang}, entry {', '.join(k.entry)})",
                fence(k.code, "cpp" if k.lang == "cuda" else "c")]
    out += ["### program", fence(c.program, "python"),
            (f"replaced: {', '.join(c.replaced) or '(none)'}; "
             f"kept: {', '.join(c.kept) or '(none)'}")]
    if c.notes:
        out.append(f"notes: {c.notes.strip()}")
    return out


def attempts_text(attempts: Sequence[Attempt], budget_chars: int) -> str:
    """One line per attempt, newest first, until ``budget_chars``; the rest counted."""
    lines: list[str] = []
    used = 0
    ordered = list(reversed(attempts))
    for i, a in enumerate(ordered):
        line = _attempt_line(a)
        if used + len(line) > budget_chars and lines:
            lines.append(f"- ... {len(ordered) - i} earlier attempt(s) left out (token budget)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _attempt_line(a: Attempt) -> str:
    if a.candidate is None:
        return f"- iteration {a.iteration}: no candidate ({a.cause}): {_first_line(a.failure)}"
    c, v = a.candidate, a.verdict
    strategy = _first_line(c.notes) or "(no notes)"
    if v is None:
        return f"- iteration {a.iteration} {c.id}: not verified; strategy: {strategy}"
    return (f"- iteration {a.iteration} {c.id}: {v.status}"
            + (f" ({_short(v.reason)})" if v.reason else "")
            + (f", {_timing(v)}" if v.status == "pass" else "") + f"; strategy: {strategy}")


def failures_text(attempts: Sequence[Attempt]) -> str:
    """Failed attempts grouped by cause (status and reason name), with an example each."""
    groups: dict[str, list[Attempt]] = {}
    for a in attempts:
        if a.candidate is None and a.failure:
            key = f"no candidate: {a.cause}"
        elif a.verdict is not None and a.verdict.status != "pass":
            name = a.verdict.reason_name
            key = a.verdict.status + (f" / {name}" if name else "")
        else:
            continue
        groups.setdefault(key, []).append(a)
    lines = []
    for key, group in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        its = ", ".join(str(a.iteration) for a in group)
        example = group[-1]
        detail = (example.failure if example.verdict is None else _example(example.verdict))
        lines.append(f"- {key}: {len(group)} attempt(s) (iterations {its}); latest: "
                     f"{_short(detail, 240)}")
    return "\n".join(lines)


def _example(v: Verdict) -> str:
    if v.build_log:
        errs = [ln for ln in v.build_log.splitlines() if "error" in ln.lower()]
        return (errs[0] if errs else v.build_log.strip().splitlines()[-1]).strip()
    bad = next((t for t in v.trials if not t.ok and t.message), None)
    return bad.message if bad is not None else (v.reason or v.status)


def _timing(v: Verdict | None) -> str:
    if v is None:
        return "not measured"
    bits = []
    if v.timings.get("ours") is not None:
        bits.append(f"{v.timings['ours']:.4g} ms")
    if v.speedup_vs_eager is not None:
        bits.append(f"{v.speedup_vs_eager:.2f}x vs eager")
    if v.speedup_vs_compile is not None:
        bits.append(f"{v.speedup_vs_compile:.2f}x vs torch.compile")
    return ", ".join(bits) or "not timed"


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else ""


def _short(text: str, n: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n - 3] + "..."


def feedback_text(v: Verdict) -> str:
    """The Verifier's structured feedback as the Coder reads it."""
    lines = [f"status: {v.status}" + (f" ({v.reason})" if v.reason else "")]
    if v.build_log:
        log = v.build_log if len(v.build_log) <= LOG_CHARS else "...\n" + v.build_log[-LOG_CHARS:]
        lines += ["compiler log:", fence(log)]
    if v.trials:
        tol = f"atol {v.atol:g}, rtol {v.rtol:g}" if v.atol is not None and v.rtol is not None else ""
        lines.append(f"correctness trials ({tol}):" if tol else "correctness trials:")
        for t in v.trials:
            lines.append(f"- seed {t.seed}: {'ok' if t.ok else 'MISMATCH'}, max abs err "
                         f"{t.max_abs_err:.3g}, max rel err {t.max_rel_err:.3g}, "
                         f"{t.mismatches} mismatching elements"
                         + (f" ({t.message})" if t.message else ""))
    elif v.max_abs_err is not None:
        lines.append(f"max abs err {v.max_abs_err:.3g}, max rel err {v.max_rel_err or 0:.3g}")
    if v.timings:
        lines.append("timings (ms): " + ", ".join(f"{k} {x:.4g}" for k, x in sorted(v.timings.items())))
    if v.speedup_vs_eager is not None:
        s = f"speedup vs eager {v.speedup_vs_eager:.2f}x"
        if v.speedup_vs_compile is not None:
            s += f", vs torch.compile {v.speedup_vs_compile:.2f}x"
        lines.append(s)
    if v.flags:
        lines.append("flags: " + ", ".join(v.flags))
    if v.aten_ops:
        lines.append("aten ops the program ran: " + ", ".join(
            f"{k} x{n}" for k, n in sorted(v.aten_ops.items())))
    if v.profile:
        lines.append("profile summary:\n" + profile_text(v.profile))
    if v.rubric:
        for name in ("anti_hacking", "cuda_engineering", "coverage", "compliance"):
            c = v.rubric.get(name)
            if isinstance(c, dict):
                lines.append(f"rubric {name} {c.get('score')}: {'; '.join(c.get('reasons', []))}")
    return "\n".join(lines)


def profile_text(profile: dict[str, Any], limit: int = 3000) -> str:
    """Kernel summary rows and ncu labels from a Verdict's profile, compactly."""
    out = []
    for key in ("kernels", "reference_kernels", "summary", "kernel_summary", "ops"):
        rows = profile.get(key)
        if isinstance(rows, list) and rows:
            label = "reference (eager) kernels" if key == "reference_kernels" else key
            out.append(f"{label}:")
            out += [f"- {json.dumps(r, sort_keys=True, default=str)}" for r in rows[:10]]
    ncu = profile.get("ncu")
    if ncu:
        out.append("ncu: " + json.dumps(ncu, sort_keys=True, default=str))
    rest = {k: v for k, v in profile.items()
            if k not in ("kernels", "reference_kernels", "summary", "kernel_summary", "ops",
                         "ncu", "timeline", "rows", "trace", "reference", "candidate")}
    if rest:
        out.append(json.dumps(rest, sort_keys=True, default=str))
    text = "\n".join(out)
    return text if len(text) <= limit else text[:limit] + " ..."
