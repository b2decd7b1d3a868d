"""The data the loop passes around: Plan, Task, Candidate, Verdict.

Plain dataclasses with no torch or IPython behind them, so they round-trip through JSON (the
session store keeps them as artifacts) and render themselves in terminals and notebooks.

>>> t = Task(id="t1", kind="pointwise_fusion", ops=["add", "relu"], reason="one pass")
>>> Plan.from_dict(Plan(tasks=[t]).to_dict()).tasks[0].ops
['add', 'relu']
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
from dataclasses import dataclass, field
from typing import Any

# Task kinds the planners emit. "keep" leaves ops to the library with a reason.
TASK_KINDS = (
    "pointwise_fusion",     # a chain of elementwise ops into one kernel
    "reduction_fusion",     # a reduction / normalisation with its prologue and epilogue
    "gemm_epilogue",        # library GEMM/conv kept, epilogue fused into one kernel
    "tensor_core_gemm",     # fp32 GEMMs on TF32 tensor cores by the 3xTF32 split (gemm.py)
    "cuda_graph",           # host orchestration: capture the forward in a CUDA graph
    "keep",                 # leave these ops to the library, with the reason
)
TASK_STATUSES = ("proposed", "approved", "skipped", "done", "failed")
VERDICT_STATUSES = ("pass", "incorrect", "rejected", "build_error", "runtime_error", "timeout")


class Shown:
    """Jupyter display: the short ``str`` as plain text (papermill and terminals show no
    dataclass dumps) beside the class's ``_repr_html_``."""

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}  # type: ignore


class _JSON:
    """to_dict / from_dict / to_json for nested dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[arg-type]

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls, s: str):
        return cls.from_dict(json.loads(s))


@dataclass
class Task(_JSON):
    """One item of the Planner's todo list."""

    id: str
    kind: str
    ops: list[str] = field(default_factory=list)      # graph node names the task covers
    targets: list[str] = field(default_factory=list)  # their aten targets, e.g. aten.relu.default
    share: float = 0.0                                 # estimated share of eager time, 0..1
    technique: str = ""                                # how: "one-pass Welford + fused GELU"
    reason: str = ""                                   # why, in one line
    refs: list[str] = field(default_factory=list)      # rag_docs section ids it relies on
    status: str = "proposed"
    params: dict[str, Any] = field(default_factory=dict)  # emitter knobs (block, vec, ...)

    def __post_init__(self) -> None:
        if self.kind not in TASK_KINDS:
            from .errors import PlanError
            raise PlanError(f"unknown task kind {self.kind!r}",
                            hint=f"use one of: {', '.join(TASK_KINDS)}")
        if self.status not in TASK_STATUSES:
            from .errors import PlanError
            raise PlanError(f"unknown task status {self.status!r}",
                            hint=f"use one of: {', '.join(TASK_STATUSES)}")


@dataclass
class Plan(Shown, _JSON):
    """The Planner's proposal: an ordered todo list plus notes for the person."""

    tasks: list[Task] = field(default_factory=list)
    device: str = "cpu"
    notes: list[str] = field(default_factory=list)
    agent: str = "offline"
    approved: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        d = dict(d)
        d["tasks"] = [t if isinstance(t, Task) else Task.from_dict(t) for t in d.get("tasks", [])]
        return super().from_dict.__func__(cls, d)  # type: ignore[attr-defined]

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        from .errors import PlanError
        raise PlanError(f"no task {task_id!r} in the plan",
                        hint=f"tasks are: {', '.join(t.id for t in self.tasks) or '(none)'}")

    def active(self) -> list[Task]:
        """Tasks the Coder should work on (everything not skipped)."""
        return [t for t in self.tasks if t.status != "skipped" and t.kind != "keep"]

    def __str__(self) -> str:
        lines = [f"Plan ({self.agent}, {self.device}){' [approved]' if self.approved else ''}"]
        for i, t in enumerate(self.tasks, 1):
            lines.append(f"{i:>2}. [{t.status}] {t.kind}: {', '.join(t.ops)}"
                         f"  ({t.share:.0%})  {t.technique}")
            if t.reason:
                lines.append(f"      why: {t.reason}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i}</td><td>{html.escape(t.status)}</td><td>{html.escape(t.kind)}</td>"
            f"<td>{html.escape(', '.join(t.ops))}</td><td>{t.share:.0%}</td>"
            f"<td>{html.escape(t.technique)}</td><td>{html.escape(t.reason)}</td></tr>"
            for i, t in enumerate(self.tasks, 1))
        return ("<table><thead><tr><th>#</th><th>status</th><th>kind</th><th>ops</th>"
                "<th>share</th><th>technique</th><th>reason</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>")


@dataclass
class KernelSource(_JSON):
    """One kernel's source as a person reads and edits it."""

    name: str
    lang: str           # "cuda" (NVRTC device code) or "c" (cc -O3 -fopenmp)
    code: str
    entry: list[str] = field(default_factory=list)  # exported function names


@dataclass
class Candidate(Shown, _JSON):
    """A generated program: kernels plus the ModelNew module that calls them.

    ``program`` is Python source that refers to ``SOURCES[name]`` for each kernel;
    ``module_source()`` prepends the SOURCES table so the result is one self-contained file
    (KernelBench form, importing only torch and ``stitchcuda_lab.runtime``).
    ``replaced`` lists aten op names the candidate claims to compute itself (the Verifier
    rejects the candidate if they run anyway); ``kept`` lists library ops it may call.
    """

    id: str = ""
    program: str = ""
    kernels: list[KernelSource] = field(default_factory=list)
    iteration: int = 0
    parent: str | None = None
    origin: str = "offline"     # offline | claude | openai | user
    notes: str = ""
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = self.digest()[:12]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Candidate":
        d = dict(d)
        d["kernels"] = [k if isinstance(k, KernelSource) else KernelSource.from_dict(k)
                        for k in d.get("kernels", [])]
        return super().from_dict.__func__(cls, d)  # type: ignore[attr-defined]

    def digest(self) -> str:
        h = hashlib.sha256(self.program.encode())
        for k in self.kernels:
            h.update(b"\0" + k.name.encode() + b"\0" + k.lang.encode() + b"\0" + k.code.encode())
        return h.hexdigest()

    def module_source(self) -> str:
        if not self.kernels:
            return self.program
        table = ",\n".join(f"    {k.name!r}: {_pyraw(k.code)}" for k in self.kernels)
        langs = ", ".join(f"{k.name!r}: {k.lang!r}" for k in self.kernels)
        return (f"# stitchcuda-lab candidate {self.id} (iteration {self.iteration}, {self.origin})\n"
                f"SOURCES = {{\n{table},\n}}\nLANGS = {{{langs}}}\n\n{self.program}")

    def with_kernel(self, name: str, code: str, origin: str = "user") -> "Candidate":
        """A new candidate with one kernel's code replaced (a person's edit)."""
        kernels = [dataclasses.replace(k, code=code) if k.name == name else k
                   for k in self.kernels]
        if not any(k.name == name for k in self.kernels):
            from .errors import UsageError
            raise UsageError(f"candidate {self.id} has no kernel {name!r}",
                             hint=f"kernels are: {', '.join(k.name for k in self.kernels)}")
        return dataclasses.replace(self, id="", kernels=kernels, parent=self.id, origin=origin)

    def __str__(self) -> str:
        ks = ", ".join(f"{k.name} ({k.lang}, {k.code.count(chr(10)) + 1} lines)" for k in self.kernels)
        return f"Candidate {self.id} (iteration {self.iteration}, {self.origin}): {ks or 'no kernels'}"

    def _repr_html_(self) -> str:
        parts = [f"<b>{html.escape(str(self))}</b>"]
        if self.notes:
            parts.append(f"<p>{html.escape(self.notes)}</p>")
        for k in self.kernels:
            parts.append(f"<details><summary>{html.escape(k.name)} ({html.escape(k.lang)})"
                         f"</summary><pre>{html.escape(k.code)}</pre></details>")
        return "<div>" + "".join(parts) + "</div>"


def _pyraw(code: str) -> str:
    if "'''" not in code and not code.endswith("\\"):
        return "r'''" + code + "'''"
    return repr(code)


@dataclass
class TrialResult(_JSON):
    seed: int
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatches: int = 0
    message: str = ""


@dataclass
class Verdict(Shown, _JSON):
    """What the Verifier concluded about one candidate. Times are milliseconds."""

    status: str
    reason: str = ""
    candidate_id: str = ""
    device: str = "cpu"
    correct: bool = False
    trials: list[TrialResult] = field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    atol: float | None = None
    rtol: float | None = None
    timings: dict[str, float] = field(default_factory=dict)   # eager, compile, ours, ..._wall
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    flags: list[str] = field(default_factory=list)            # e.g. "speedup_over_10x"
    build_log: str = ""
    aten_ops: dict[str, int] = field(default_factory=dict)    # ops the candidate ran
    profile: dict[str, Any] = field(default_factory=dict)     # timeline rows, kernel summary, ncu
    rubric: dict[str, Any] = field(default_factory=dict)
    reward: int | None = None

    def __post_init__(self) -> None:
        if self.status not in VERDICT_STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        self.trials = [t if isinstance(t, TrialResult) else TrialResult.from_dict(t)
                       for t in self.trials]

    def summary(self) -> str:
        s = f"{self.status}"
        if self.reason:
            s += f" ({self.reason})"
        if self.speedup_vs_eager is not None:
            s += f"; {self.speedup_vs_eager:.2f}x vs eager"
        if self.speedup_vs_compile is not None:
            s += f", {self.speedup_vs_compile:.2f}x vs torch.compile"
        if self.max_abs_err is not None:
            s += f"; max abs err {self.max_abs_err:.2e}"
        return s

    def __str__(self) -> str:
        return f"Verdict {self.candidate_id}: {self.summary()}"

    def _repr_html_(self) -> str:
        color = {"pass": "#1a7f37"}.get(self.status, "#cf222e")
        t = "".join(f"<tr><td>{html.escape(k)}</td><td>{v:.4f} ms</td></tr>"
                    for k, v in sorted(self.timings.items()))
        return (f"<div><b style='color:{color}'>{html.escape(self.status)}</b> "
                f"{html.escape(self.summary()[len(self.status):].lstrip('; '))}"
                f"<table>{t}</table></div>")
