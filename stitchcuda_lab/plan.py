"""The Planner's output: a Plan, an ordered todo list of Tasks a person approves or edits.

Plain dataclasses with no torch or IPython behind them, so they round-trip through JSON (the
session store keeps them as artifacts) and render themselves in terminals and notebooks.

>>> t = Task(id="t1", kind="pointwise_fusion", ops=["add", "relu"], reason="one pass")
>>> Plan.from_dict(Plan(tasks=[t]).to_dict()).tasks[0].ops
['add', 'relu']
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

from . import aten
from .record import Record, Shown

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



@dataclass
class Task(Record):
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


def _int_in(lo: int, hi: int, step: int = 1):
    return lambda v: (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
                      and v % step == 0)


# The launch knobs a task's params may set for the offline coder (agents/offline/launch.py
# reads them): (test, what it must be, an example). A value outside them built a kernel that wrote nothing, and the
# verdict blamed the kernel, not the edit.
PARAM_RULES: dict[str, tuple[Any, str, Any]] = {
    "block": (_int_in(32, 1024, 32), "a multiple of 32 from 32 to 1024 (threads per block)",
              256),
    "vec": (lambda v: v in (1, 4) and not isinstance(v, bool), "1 or 4 (float4 loads)", 4),
    "ipt": (_int_in(1, 16), "a whole number from 1 to 16 (items per thread)", 2),
    "unroll": (_int_in(1, 8), "a whole number from 1 to 8 (loads in flight)", 2),
    "waves": (_int_in(1, 1 << 16), "a whole number from 1 (grid cap in blocks per SM)", 512),
    "rows": (lambda v: v in ("block", "warp", "thread", "split"), "block, warp, thread or split",
             "warp"),
    "cache": (lambda v: isinstance(v, bool), "true or false (row cache)", True),
    "cluster": (lambda v: v in (0, 2, 4, 8) and not isinstance(v, bool),
                "0, 2, 4 or 8 (blocks of a Hopper thread-block cluster sharing a row; 0: none)",
                8),
    "tc": (lambda v: isinstance(v, bool), "true or false (a dense convolution on tensor cores, "
           "3xTF32)", True),
    "chunk": (_int_in(64, 1 << 30), "a whole number of at least 64 (elements per C task)",
              16384),
}


@dataclass
class Plan(Shown, Record):
    """The Planner's proposal: an ordered todo list plus notes for the person."""

    tasks: list[Task] = field(default_factory=list)
    device: str = "cpu"
    notes: list[str] = field(default_factory=list)
    agent: str = "offline"
    approved: bool = False

    def __post_init__(self) -> None:
        if self.agent != "offline":   # an LLM coder reads params in its own way
            return
        for t in self.tasks:
            for key, value in t.params.items():
                rule = PARAM_RULES.get(key)
                if rule is not None and not rule[0](value):
                    from .errors import PlanError
                    raise PlanError(
                        f"task {t.id}: params {key!r} = {value!r} is not {rule[1]}",
                        hint=f"e.g. {{{json.dumps(key)}: {json.dumps(rule[2])}}}; leave a knob "
                             "out to take the coder's default")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        d = dict(d)
        d["tasks"] = [t if isinstance(t, Task) else Task.from_dict(t) for t in d.get("tasks", [])]
        return super().from_dict(d)

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

    def blockers(self) -> list[str]:
        """``"<op>: <why>"`` for each computing op a ``keep`` task leaves to PyTorch (no kernel
        template, an unsupported case): the ops that stop a plan from replacing the whole
        forward. Library ops (GEMM, convolution) kept by design and cheap ops are not listed."""
        out: list[str] = []
        for t in self.tasks:
            if t.kind != "keep":
                continue
            for target in t.targets:
                if aten.op_class(target) != "compute" or target == "getitem":
                    continue
                op = aten.short(target)
                why = t.reason
                for prefix in (f"{op}: ", f"{target}: "):
                    if why.startswith(prefix):
                        why = why[len(prefix):]
                line = f"{op}: {why}" if why else op
                if line not in out:
                    out.append(line)
        return out

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
