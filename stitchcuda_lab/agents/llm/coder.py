"""The LLM Coder: an approved plan (and, when refining, the Verifier's feedback) in; a Candidate out.

The system prompt teaches the runtime contract (prompts/runtime.md); the cached context holds
the problem, graph, profile and retrieved sections; the user turn holds the plan and, from
iteration 1 on, the previous candidate with its structured feedback: compiler log, mismatch
statistics, timings, profile summary and hardware-counter labels. The reply comes through the
``submit_candidate`` tool and is checked (program parses, ModelNew defined, every kernel
loaded, the device's kernel language) before it becomes a Candidate.
"""

from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING, Any

from ...candidate import Candidate, KernelSource
from ...plan import Plan
from ...verdict import Verdict
from .context import fence, lang_for, problem_context, prompt, rag_query, retrieve
from .planner import _UNSET, KnowledgeMixin
from .schema import CANDIDATE_SCHEMA
from .structured import Request, StructuredClient, Tool

if TYPE_CHECKING:
    from ...graph import Graph
    from ...problem import Problem
    from ...settings import Settings

CANDIDATE_TOOL = Tool(
    "submit_candidate",
    "Submit the kernels and the ModelNew program that calls them through the runtime.",
    CANDIDATE_SCHEMA)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LOG_CHARS = 6000


class LLMCoder(KnowledgeMixin):
    """``Coder`` backed by a structured LLM client."""

    def __init__(self, client: StructuredClient, *, knowledge: Any = _UNSET,
                 name: str | None = None):
        self.client = client
        self.name = name or getattr(client, "origin", client.provider)
        if knowledge is not _UNSET:
            self.knowledge = knowledge

    def code(self, problem: Problem, graph: Graph, plan: Plan, settings: Settings, *,
             iteration: int, previous: Candidate | None = None,
             feedback: Verdict | None = None) -> list[Candidate]:
        tasks = plan.active()
        words = " ".join(dict.fromkeys(w for t in tasks for w in (t.kind.replace("_", " "),
                                                                   t.technique) if w))
        sections = retrieve(self.knowledge, rag_query(graph, words), settings.rag_top_k)
        ids = [s["id"] for s in sections]
        lang = lang_for(graph.device)
        request = Request(
            role="coder", task=",".join(t.id for t in tasks) or "plan", iteration=iteration,
            system=prompt("coder") + "\n\n" + prompt("runtime"),
            context=problem_context(problem, graph, sections),
            user=coder_request(plan, lang, iteration, previous, feedback),
            tool=CANDIDATE_TOOL, refs=ids, check=lambda data: check_candidate(data, lang))
        reply = self.client.ask(request)
        cand = candidate_from_reply(reply.data, iteration=iteration,
                                    parent=previous.id if previous else None, origin=self.name)
        cand.params.update({"refs": ids, "model": reply.model})
        return [cand]


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
    loaded = {n.slice.value for n in ast.walk(tree) if isinstance(n, ast.Subscript)
              and isinstance(n.value, ast.Name) and n.value.id == "SOURCES"
              and isinstance(n.slice, ast.Constant)}
    for name in names:
        if name not in loaded:
            errors.append(f"$.program: kernel {name!r} is never loaded "
                          f"(runtime.load(SOURCES[{name!r}], lang=LANGS[{name!r}], name={name!r}))")
    for name in sorted(loaded - set(names)):
        errors.append(f"$.program: SOURCES[{name!r}] has no kernel of that name")
    assigned = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    if assigned & {"SOURCES", "LANGS"}:
        errors.append("$.program: do not define SOURCES or LANGS; the workbench adds them")
    return errors


def coder_request(plan: Plan, lang: str, iteration: int, previous: Candidate | None,
                  feedback: Verdict | None) -> str:
    parts = ["## Approved plan"]
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
        parts.append(line)
    kept = [t for t in plan.tasks if t.kind == "keep" or t.status == "skipped"]
    if kept:
        parts.append("Left to the library (list their targets in `kept`):")
        parts += [f"- {t.id}: {', '.join(t.targets or t.ops)} ({t.reason})" for t in kept]
    if previous is not None:
        parts += [f"## Your previous candidate {previous.id} (iteration {previous.iteration})"]
        for k in previous.kernels:
            parts += [f"### kernel `{k.name}` ({k.lang}, entry {', '.join(k.entry)})",
                      fence(k.code, "cpp" if k.lang == "cuda" else "c")]
        parts += ["### program", fence(previous.program, "python"),
                  (f"replaced: {', '.join(previous.replaced) or '(none)'}; "
                   f"kept: {', '.join(previous.kept) or '(none)'}")]
    if feedback is not None:
        parts += ["## Verifier feedback", feedback_text(feedback)]
    parts.append("## Request")
    if previous is None and feedback is None:
        parts.append(f"Iteration {iteration}: write the first candidate for every task above, "
                     f"kernels in lang {lang!r}. Call submit_candidate.")
    elif feedback is not None and feedback.status != "pass":
        parts.append(f"Iteration {iteration}: the previous candidate failed ({feedback.status}). "
                     "Find the cause in the feedback, fix it, keep what works, and say what you "
                     "changed in `notes`. Call submit_candidate with the complete candidate.")
    else:
        parts.append(f"Iteration {iteration}: the previous candidate is correct. Make it faster "
                     "without losing correctness (use the profile), and say what you changed in "
                     "`notes`. Call submit_candidate with the complete candidate.")
    return "\n\n".join(parts)


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
    for key in ("kernels", "summary", "kernel_summary", "ops"):
        rows = profile.get(key)
        if isinstance(rows, list) and rows:
            out.append(f"{key}:")
            out += [f"- {json.dumps(r, sort_keys=True, default=str)}" for r in rows[:10]]
    ncu = profile.get("ncu")
    if ncu:
        out.append("ncu: " + json.dumps(ncu, sort_keys=True, default=str))
    rest = {k: v for k, v in profile.items()
            if k not in ("kernels", "summary", "kernel_summary", "ops", "ncu", "timeline", "rows",
                         "trace")}
    if rest:
        out.append(json.dumps(rest, sort_keys=True, default=str))
    text = "\n".join(out)
    return text if len(text) <= limit else text[:limit] + " ..."
