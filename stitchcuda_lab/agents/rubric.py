"""The rubric: scores one candidate from the Verifier's facts and its source, by rules.

Four criteria, each 0..1 with the reasons that set it:

- ``anti_hacking``     the Verifier's rejection and flags, replaced ops that still ran, and
                       source patterns (results cached across calls, inputs returned, the
                       reference Model or get_inputs used, other streams or threads)
- ``cuda_engineering`` kernel quality for the language: grid-/block-stride loops, vectorised access,
                       ``__restrict__``, warp/shared-memory reductions where the candidate
                       replaces a reduction, no per-element atomics (C: OpenMP, SIMD, restrict);
                       0 for code that never built
- ``coverage``         the share of the reference's compute ops computed by own kernels; 0 for a
                       candidate whose forward never ran (build error, crash, timeout)
- ``compliance``       ModelNew present, only allowed imports, every kernel loaded through the
                       runtime, no torch call for an op the candidate claims to replace

``reward(verdict)`` is the tier -1 (wrong, rejected), 1 (correct), 2 (>5% faster than eager),
3 (>5% faster than eager and torch.compile). Pure: no torch, no network; an LLM judge's scores
merge in with ``merge_judge``. ``grade`` fills a verdict's rubric and reward (the Session calls
it for every verdict).

>>> from stitchcuda_lab.verdict import Verdict
>>> reward(Verdict(status="pass", correct=True, speedup_vs_eager=1.2, speedup_vs_compile=0.9))
2
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from .. import aten
from ..candidate import Candidate
from ..errors import StitchError
from ..verdict import Verdict

if TYPE_CHECKING:
    from ..graph import Graph
    from ..problem import Problem

CRITERIA = ("anti_hacking", "cuda_engineering", "coverage", "compliance")
FASTER = 1.05   # "more than 5% faster"


class Reviewer(Protocol):
    """A judge ``grade`` asks for its scores (agents/llm/reviewer.py's LLMReviewer)."""

    def score(self, candidate: Candidate, verdict: Verdict, *, problem: Problem | None = None,
              reference_ops: Iterable[str] | None = None) -> dict[str, Any]:
        """The rule rubric merged with the judge's ``{criterion: {"score", "reason"}}``;
        raises StitchError when the judge could not be had."""
        ...

# Top-level modules a candidate program may import. torch covers torch.utils.cpp_extension,
# which KernelBench-style candidates (load_inline) use.
ALLOWED_IMPORTS = ("torch", "math", "stitchcuda_lab", "typing", "__future__")

# Python spellings of aten ops, for spotting torch fallbacks in source.
_PY_NAMES = {
    "addmm": ("linear", "addmm", "matmul"), "mm": ("mm", "matmul", "linear"),
    "bmm": ("bmm", "matmul"), "convolution": ("conv1d", "conv2d", "conv3d"),
    "_softmax": ("softmax",), "_log_softmax": ("log_softmax",),
    "native_layer_norm": ("layer_norm",), "native_group_norm": ("group_norm",),
    "native_batch_norm": ("batch_norm",), "clamp_min": ("clamp_min", "clamp"),
    "clamp_max": ("clamp_max", "clamp"), "leaky_relu": ("leaky_relu",),
}


def reward(verdict: Verdict | dict[str, Any]) -> int:
    """Reward tier: -1 wrong or rejected, 1 correct, 2 >5% faster than eager, 3 and vs compile."""
    v = _verdict(verdict)
    if v.status != "pass" or not v.correct:
        return -1
    if v.speedup_vs_eager is None or v.speedup_vs_eager <= FASTER:
        return 1
    if v.speedup_vs_compile is not None and v.speedup_vs_compile > FASTER:
        return 3
    return 2


def score(candidate: Candidate | dict[str, Any], verdict: Verdict | dict[str, Any], *,
          reference_ops: Iterable[str] | None = None) -> dict[str, Any]:
    """Rule scores for ``candidate`` given its ``verdict``.

    ``reference_ops`` are the aten targets of the reference's compute nodes (one per node);
    without them coverage is judged from what the candidate replaced, kept and still ran.
    Returns ``{criterion: {"score", "reasons"}, "overall", "reward", "correct"}``.
    """
    c = candidate if isinstance(candidate, Candidate) else Candidate.from_dict(candidate)
    v = _verdict(verdict)
    src = _Source(c.program)
    out: dict[str, Any] = {
        "anti_hacking": _anti_hacking(c, v, src),
        "cuda_engineering": _engineering(c, v),
        "coverage": _coverage(c, v, reference_ops),
        "compliance": _compliance(c, v, src),
    }
    return _finish(out, v)


def reference_ops(graph: Graph | None) -> list[str] | None:
    """The aten targets of the reference's compute nodes (what coverage counts), or None
    without a graph."""
    if graph is None:
        return None
    return [n.target for n in graph.nodes if n.op == "call_function"
            and n.op_class not in ("data_movement", "input")]


def grade(candidate: Candidate, verdict: Verdict, *, reference_ops: Iterable[str] | None = None,
          reviewer: Reviewer | None = None, problem: Problem | None = None) -> None:
    """Fill ``verdict.rubric`` and ``verdict.reward``: the rule scores, then, with a
    ``reviewer`` (an LLM judge), its merged scores.

    A bug in the rules must not lose a verdict: the rubric then holds the error and the reward
    is the tier alone. The judge is advice: when it fails, the rule scores stay, with
    ``judge_error``.
    """
    try:
        verdict.rubric = score(candidate, verdict, reference_ops=reference_ops)
        verdict.reward = verdict.rubric.get("reward", reward(verdict))
    except Exception as e:  # noqa: BLE001  (a scoring bug must not lose a verdict)
        verdict.rubric = {"error": f"{type(e).__name__}: {e}"}
        verdict.reward = reward(verdict)
        return
    if reviewer is None:
        return
    try:
        judged = reviewer.score(candidate, verdict, problem=problem, reference_ops=reference_ops)
    except StitchError as e:
        verdict.rubric["judge_error"] = e.message
        return
    verdict.rubric = judged
    verdict.reward = judged.get("reward", verdict.reward)


def merge_judge(scores: dict[str, Any], judge: dict[str, Any]) -> dict[str, Any]:
    """Merge an LLM judge's ``{criterion: {"score", "reason"}}`` into rule ``scores``.

    Anti-hacking and compliance take the lower of the two (a judge may see a hack the rules
    miss, never excuse one they caught); engineering and coverage take the mean.
    """
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in scores.items()}
    for name in CRITERIA:
        j = judge.get(name)
        if not isinstance(j, dict) or not isinstance(j.get("score"), (int, float)):
            continue
        js = min(max(float(j["score"]), 0.0), 1.0)
        rule = merged[name]["score"]
        new = min(rule, js) if name in ("anti_hacking", "compliance") else (rule + js) / 2
        merged[name] = {"score": round(new, 3),
                        "reasons": [*merged[name]["reasons"], f"judge ({js:.2f}): {j.get('reason', '')}"],
                        "rule_score": rule, "judge_score": js}
    merged["judge"] = judge
    return _finish(merged, None, base_reward=scores.get("reward"))


def _finish(out: dict[str, Any], v: Verdict | None, base_reward: int | None = None) -> dict[str, Any]:
    out["overall"] = round(sum(out[k]["score"] for k in CRITERIA) / len(CRITERIA), 3)
    r = reward(v) if v is not None else (base_reward if base_reward is not None else -1)
    if out["anti_hacking"]["score"] == 0.0:
        r = -1   # a hack the rules or the judge caught is never rewarded
    out["reward"] = r
    if v is not None:
        out["correct"] = bool(v.correct and v.status == "pass")
    return out


def _verdict(v: Verdict | dict[str, Any]) -> Verdict:
    return v if isinstance(v, Verdict) else Verdict.from_dict(v)


def _crit(score: float, reasons: list[str]) -> dict[str, Any]:
    return {"score": round(min(max(score, 0.0), 1.0), 3), "reasons": reasons}


# --- source facts ------------------------------------------------------------------------

class _Source:
    """What the rules need from the program's AST (robust to syntax errors)."""

    def __init__(self, program: str):
        self.error = ""
        try:
            self.tree: ast.Module | None = ast.parse(program)
        except SyntaxError as e:
            self.tree, self.error = None, f"line {e.lineno}: {e.msg}"
        nodes = list(ast.walk(self.tree)) if self.tree else []
        self.classes = {n.name: n for n in nodes if isinstance(n, ast.ClassDef)}
        self.imports = sorted({a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
                              | {n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)})
        self.names = {n.id for n in nodes if isinstance(n, ast.Name)}
        self.attrs = {n.attr for n in nodes if isinstance(n, ast.Attribute)}
        self.decorators = {_dotted(d.func if isinstance(d, ast.Call) else d)
                           for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                           for d in n.decorator_list}
        self.forward = None
        cls = self.classes.get("ModelNew")
        if cls is not None:
            self.forward = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                                 and f.name == "forward"), None)
        # SOURCES["name"] subscripts: which kernels the program loads
        self.loaded = {n.slice.value for n in nodes if isinstance(n, ast.Subscript)
                       and isinstance(n.value, ast.Name) and n.value.id == "SOURCES"
                       and isinstance(n.slice, ast.Constant)}
        # `{name: runtime.load(SOURCES[name], ...) for name in SOURCES}` loads every kernel
        for n in nodes:
            if isinstance(n, (ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp)):
                for gen in n.generators:
                    if isinstance(gen.iter, ast.Name) and gen.iter.id == "SOURCES" and \
                            isinstance(gen.target, ast.Name) and any(
                                isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name)
                                and x.value.id == "SOURCES" and isinstance(x.slice, ast.Name)
                                and x.slice.id == gen.target.id for x in ast.walk(n)):
                        self.loaded.add("*")
        self.loaded |= grouped_loads(nodes)
        self.assigned = {t.id for n in nodes if isinstance(n, ast.Assign) for t in n.targets
                         if isinstance(t, ast.Name)}

    def calls(self, scope: ast.AST | None = None) -> list[str]:
        """Called function names, dotted where possible (``torch.relu``, ``x.relu``)."""
        root = scope if scope is not None else self.tree
        if root is None:
            return []
        return [_dotted(n.func) for n in ast.walk(root) if isinstance(n, ast.Call)]


def grouped_loads(nodes: list[ast.AST]) -> set[str]:
    """The kernels a program loads through ``runtime.load_group(SOURCES, group, ...)``: the
    names in ``group`` where it is a literal list, or a loop variable over a literal list of
    lists assigned to a name (the offline coder's ``_GROUPS``)."""
    lists = {t.id: n.value for n in nodes if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    loops = {g.target.id: g.iter.id for n in nodes
             if isinstance(n, (ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.For))
             for g in (n.generators if not isinstance(n, ast.For) else [n])
             if isinstance(g.target, ast.Name) and isinstance(g.iter, ast.Name)}
    out: set[str] = set()
    for n in nodes:
        if not (isinstance(n, ast.Call) and _dotted(n.func).endswith("load_group")
                and len(n.args) >= 2 and isinstance(n.args[0], ast.Name)
                and n.args[0].id == "SOURCES"):
            continue
        group = n.args[1]
        if isinstance(group, ast.Name) and group.id in loops:
            group = lists.get(loops[group.id], group)
        if isinstance(group, (ast.List, ast.Tuple)):
            out |= {c.value for c in ast.walk(group)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return out


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


# --- criteria ----------------------------------------------------------------------------

def _anti_hacking(c: Candidate, v: Verdict, src: _Source) -> dict[str, Any]:
    score, reasons = 1.0, []

    def hit(value: float, why: str) -> None:
        nonlocal score
        score = min(score, value)
        reasons.append(why)

    if v.status == "rejected":
        hit(0.0, f"Verifier rejected it: {v.reason or 'hacking pattern'}")
    ran = sorted(t for t in c.replaced if v.aten_ops.get(t))
    if ran:
        hit(0.0, f"ops it claims to replace still ran through torch: {', '.join(ran)}")
    for flag in v.flags:
        if flag.startswith("speedup_over"):
            hit(0.5, f"flagged for review: {flag}")
        elif any(w in flag for w in ("alias", "cache", "stream", "mutat", "nondetermin")):
            hit(0.5, f"Verifier flag: {flag}")
    if src.decorators & {"lru_cache", "functools.lru_cache", "cache", "functools.cache"}:
        hit(0.0, "memoises results (lru_cache/cache)")
    if "Model" in src.names:
        hit(0.0, "uses the reference Model")
    if "get_inputs" in src.names:
        hit(0.0, "reads the test inputs (get_inputs)")
    f = src.forward
    if f is not None:
        params = {a.arg for a in f.args.args[1:]}
        for n in ast.walk(f):
            if isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id in params:
                hit(0.0, f"forward returns its input {n.value.id!r}")
            if (isinstance(n, ast.Return) and isinstance(n.value, ast.Attribute)
                    and _dotted(n.value.value) == "self"):
                hit(0.0, f"forward returns stored state self.{n.value.attr} (cached result)")
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and _dotted(t.value) == "self":
                        hit(0.5, f"forward writes state (self.{t.attr}): results may carry across calls")
            if isinstance(n, ast.Try):
                hit(0.5, "try/except in forward can hide a fallback")
        fcalls = src.calls(f)
        if any(x.endswith(("manual_seed", ".seed")) for x in fcalls):
            hit(0.3, "reseeds random generators in forward")
    text = c.program
    if re.search(r"\bthreading\b|\bmultiprocessing\b|concurrent\.futures", text):
        hit(0.3, "uses threads or processes")
    if re.search(r"torch\.cuda\.(Stream|stream)\b|\bStream\(", text):
        hit(0.3, "launches work on other CUDA streams")
    if not reasons:
        reasons.append("no hacking pattern found")
    return _crit(score, reasons)


# Statuses of a candidate whose forward never completed: nothing it claims was shown.
NEVER_RAN = ("build_error", "runtime_error", "timeout")


def _engineering(c: Candidate, v: Verdict) -> dict[str, Any]:
    cuda = "\n".join(k.code for k in c.kernels if k.lang == "cuda")
    ccode = "\n".join(k.code for k in c.kernels if k.lang == "c")
    if not c.kernels:
        return _crit(0.0, ["no own kernels"])
    if v.status == "build_error":
        return _crit(0.0, ["never built: code that does not compile earns no engineering credit"])
    reduces = any(aten.is_row_reduction(t) for t in c.replaced)
    checks: list[tuple[bool, str, str]] = []   # (passed, good reason, bad reason)
    if cuda:
        warp = bool(re.search(r"__shfl_(xor|down|up)?_?sync|cub::|cooperative_groups", cuda))
        shared = "__shared__" in cuda
        atomics = bool(re.search(r"\batomic(Add|Max|Min|Sub|Exch|CAS)\b", cuda))
        checks += [
            (bool(re.search(r"blockDim\.x\s*\*\s*gridDim\.x|gridDim\.x\s*\*\s*blockDim\.x"
                            r"|\+=\s*blockDim\.x\b", cuda)),
             "grid- or block-stride loops", "no grid-stride loop"),
            (bool(re.search(r"\b(float4|float2|__half2|half2|__nv_bfloat162|int4|double2)\b", cuda)),
             "vectorised loads/stores", "scalar memory access only (no float4/half2)"),
            ("__restrict__" in cuda, "__restrict__ pointers", "pointers not __restrict__"),
            (not atomics or warp or shared, "no per-element atomics",
             "per-element atomics without a block/warp reduction"),
        ]
        if reduces:
            checks += [(warp, "warp-shuffle reduction", "reduction without warp shuffles"),
                       (shared, "shared-memory reduction", "reduction without shared memory")]
    if ccode:
        checks += [
            (bool(re.search(r"#pragma\s+omp\s+parallel", ccode)), "OpenMP parallel loops",
             "no OpenMP parallel loop"),
            (bool(re.search(r"#pragma\s+omp\s+(parallel\s+for\s+)?simd|#pragma\s+omp\s+.*\bsimd\b",
                            ccode)), "SIMD inner loops", "no SIMD pragma"),
            (bool(re.search(r"\brestrict\b|__restrict\b", ccode)), "restrict pointers",
             "pointers not restrict"),
            (not re.search(r"#pragma\s+omp\s+(atomic|critical)", ccode), "no atomics/critical",
             "omp atomic/critical in the loop"),
        ]
        if reduces:
            checks.append((bool(re.search(r"reduction\s*\(", ccode)) or
                           bool(re.search(r"#pragma\s+omp\s+parallel\s+for", ccode)),
                           "parallel reduction", "reduction is not parallelised"))
    passed = sum(ok for ok, _, _ in checks)
    reasons = [good if ok else bad for ok, good, bad in checks]
    return _crit(passed / len(checks) if checks else 0.0, reasons)


def _coverage(c: Candidate, v: Verdict, reference_ops: Iterable[str] | None) -> dict[str, Any]:
    if v.status in NEVER_RAN:
        return _crit(0.0, [f"never ran ({v.status}): the ops it claims were never computed"])
    ran = {t for t, n in v.aten_ops.items() if n}
    if reference_ops is not None:
        ref = [t for t in reference_ops if aten.computes(t)]
    else:
        extra = sorted(t for t in ran if aten.computes(t)
                       and t not in c.replaced and t not in c.kept)
        ref = list(dict.fromkeys([*c.replaced, *c.kept, *extra]))
    if not ref:
        return _crit(0.0, ["no compute ops known for the reference"])
    mine = set(c.replaced) - ran
    covered = [t for t in ref if t in mine]
    reasons = [f"{len(covered)} of {len(ref)} compute ops in own kernels"
               + (f" ({', '.join(sorted({aten.short(t) for t in covered}))})" if covered else "")]
    left = sorted({aten.short(t) for t in ref if t not in mine})
    if left:
        reasons.append(f"left to the library: {', '.join(left)}")
    return _crit(len(covered) / len(ref), reasons)


def _compliance(c: Candidate, v: Verdict, src: _Source) -> dict[str, Any]:
    if src.tree is None:
        return _crit(0.0, [f"program does not parse ({src.error})"])
    if "ModelNew" not in src.classes:
        return _crit(0.0, ["no ModelNew class"])
    checks: list[tuple[bool, str]] = []
    bad = [m for m in src.imports if m.split(".")[0] not in ALLOWED_IMPORTS]
    checks.append((not bad, f"imports outside torch/math/runtime: {', '.join(bad)}" if bad
                   else "only allowed imports"))
    if c.kernels:
        unused = sorted(k.name for k in c.kernels) if "runtime" not in src.names | src.attrs else \
            sorted(k.name for k in c.kernels if k.name not in src.loaded and "*" not in src.loaded)
        checks.append((not unused, f"kernels never loaded through runtime.load: {', '.join(unused)}"
                       if unused else "every kernel loaded through the runtime"))
        redefined = sorted(src.assigned & {"SOURCES", "LANGS"})
        checks.append((not redefined, f"program redefines {', '.join(redefined)}" if redefined
                       else "SOURCES/LANGS left to the workbench"))
    fallbacks = _fallbacks(c, v, src)
    checks.append((not fallbacks, f"torch fallback for replaced ops: {', '.join(fallbacks)}"
                   if fallbacks else "no torch fallback for replaced ops"))
    reasons = ["ModelNew present", *[why for _, why in checks]]
    return _crit(sum(ok for ok, _ in checks) / len(checks), reasons)


def _fallbacks(c: Candidate, v: Verdict, src: _Source) -> list[str]:
    found = {aten.short(t) for t in c.replaced if v.aten_ops.get(t)}
    scope = src.forward if src.forward is not None else src.tree
    # the workbench's own runtime (runtime.load, runtime.gemm.linear) is not a torch fallback
    called = {name.rsplit(".", 1)[-1] for name in src.calls(scope)
              if not name.startswith("runtime.")
              and (not name.startswith("self.") or name.count(".") > 1)}
    for t in c.replaced:
        base = aten.short(t)
        spellings = _PY_NAMES.get(base, (base.lstrip("_"),))
        if called & set(spellings):
            found.add(base)
    return sorted(found)
