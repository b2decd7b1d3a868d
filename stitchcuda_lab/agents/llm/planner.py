"""The LLM Planner: model source, graph, eager profile and retrieved sections in; a Plan out.

The reply comes through the ``submit_plan`` tool, whose schema mirrors ``plan.Task``; node
names are checked against the graph (a wrong name goes back to the model in the repair turn),
targets are filled from the graph, and ``refs`` keep only the section ids the prompt showed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...plan import Plan, Task
from .context import compute_nodes, default_knowledge, problem_context, prompt, rag_query, retrieve
from .schema import PLAN_SCHEMA
from .structured import Request, StructuredClient, Tool

if TYPE_CHECKING:
    from ...graph import Graph
    from ...problem import Problem
    from ...settings import Settings

PLAN_TOOL = Tool("submit_plan", "Submit the ordered todo list of Tasks for this problem.",
                 PLAN_SCHEMA)

_UNSET: Any = object()


class KnowledgeMixin:
    """Lazy access to the knowledge base (agents/rag.py) shared by the LLM roles."""

    _knowledge: Any = _UNSET

    @property
    def knowledge(self) -> Any:
        if self._knowledge is _UNSET:
            self._knowledge = default_knowledge()
        return self._knowledge

    @knowledge.setter
    def knowledge(self, value: Any) -> None:
        self._knowledge = value

    client: StructuredClient    # every LLM role has one (set in its __init__)

    # The session sets these: ``facts`` returns the session's measured facts (hardware, the
    # Verifier's baseline timings), ``guard`` stops requests once a spending cap is reached,
    # ``recorder`` persists exchanges and ``progress`` shows them.
    facts: Any = None

    def session_facts(self) -> dict[str, Any]:
        return dict(self.facts() or {}) if callable(self.facts) else {}

    @property
    def guard(self) -> Any:
        return self.client.guard

    @guard.setter
    def guard(self, fn: Any) -> None:
        self.client.guard = fn

    @property
    def recorder(self) -> Any:
        return self.client.recorder

    @recorder.setter
    def recorder(self, fn: Any) -> None:
        self.client.recorder = fn

    @property
    def progress(self) -> Any:
        return self.client.progress

    @progress.setter
    def progress(self, fn: Any) -> None:
        self.client.progress = fn


class LLMPlanner(KnowledgeMixin):
    """``Planner`` backed by a structured LLM client (Claude, OpenAI-compatible, replay)."""

    def __init__(self, client: StructuredClient, *, knowledge: Any = _UNSET,
                 name: str | None = None):
        self.client = client
        self.name: str = name or str(getattr(client, "origin", client.provider))
        if knowledge is not _UNSET:
            self.knowledge = knowledge

    def plan(self, problem: Problem, graph: Graph, settings: Settings) -> Plan:
        sections = retrieve(self.knowledge, rag_query(graph), settings.rag_top_k, graph)
        ids = [s["id"] for s in sections]
        request = Request(
            role="planner", task="plan", system=prompt("planner"),
            context=problem_context(problem, graph, sections, self.session_facts()),
            user=_user(graph), tool=PLAN_TOOL, refs=ids, meta={"skill": "planning"},
            check=lambda data: check_plan(data, graph))
        reply = self.client.ask(request)
        return plan_from_reply(reply.data, graph, ids, agent=self.name)


def _user(graph: Graph) -> str:
    nodes = compute_nodes(graph) or [n for n in graph.nodes if n.op == "call_function"]
    listed = "\n".join(f"- {n.name}: {n.target} ({n.op_class})" for n in nodes)
    return (f"Propose the plan for device `{graph.device}`. The compute nodes are:\n{listed}\n\n"
            "Call submit_plan.")


def check_plan(data: dict[str, Any], graph: Graph) -> list[str]:
    """Semantic checks the schema cannot express: ids unique, node names exist."""
    names = {n.name for n in graph.nodes if n.op == "call_function"}
    errors, seen = [], set()
    for i, t in enumerate(data["tasks"]):
        if t["id"] in seen:
            errors.append(f"$.tasks[{i}].id: duplicate id {t['id']!r}")
        seen.add(t["id"])
        unknown = [op for op in t["ops"] if op not in names]
        if unknown:
            errors.append(f"$.tasks[{i}].ops: not graph nodes: {', '.join(unknown)} "
                          f"(nodes are: {', '.join(sorted(names))})")
        if t["kind"] == "cuda_graph" and not graph.device.startswith("cuda"):
            errors.append(f"$.tasks[{i}].kind: cuda_graph needs a CUDA device, not {graph.device}")
    return errors


def plan_from_reply(data: dict[str, Any], graph: Graph, shown_refs: list[str], *,
                    agent: str) -> Plan:
    """A validated submit_plan input as a Plan (targets from the graph, refs as shown)."""
    target = {n.name: n.target for n in graph.nodes}
    tasks = []
    for t in data["tasks"]:
        refs = [r for r in t.get("refs", []) if r in shown_refs]
        tasks.append(Task(
            id=t["id"], kind=t["kind"], ops=list(t["ops"]),
            targets=[target[op] for op in t["ops"] if op in target],
            share=float(t.get("share", 0.0)), technique=t.get("technique", ""),
            reason=t["reason"], refs=refs, params=dict(t.get("params", {}))))
    return Plan(tasks=tasks, device=graph.device, notes=list(data.get("notes", [])), agent=agent)
