"""What the LLM agents put in front of the model: prompt files, problem context, retrieval.

The per-problem context (model source, graph summary, eager profile, retrieved knowledge-base
sections) is one text block that stays byte-identical across a session's calls, so it is
cached after the first request.
"""

from __future__ import annotations

import contextlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import aten

if TYPE_CHECKING:
    from ...graph import Graph
    from ...problem import Problem

PROMPTS = Path(__file__).with_name("prompts")

SECTION_CHARS = 3000   # per retrieved section in a prompt


@cache
def prompt(name: str) -> str:
    """A prompt file from prompts/ (``prompt("coder")`` reads prompts/coder.md)."""
    return (PROMPTS / f"{name}.md").read_text()


def lang_for(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "c"


def compute_nodes(graph: Graph) -> list[Any]:
    """The calls that compute (library or own kernels); views, copies and allocations do not."""
    return [n for n in graph.calls() if aten.computes(n.target)]


def rag_query(graph: Graph, extra: str = "") -> str:
    """Retrieval query from the graph's op classes and targets (plus plan words)."""
    words: list[str] = []
    for n in compute_nodes(graph) or [n for n in graph.nodes if n.op == "call_function"]:
        for w in (n.op_class, aten.short(n.target)):
            if w and w not in words:
                words.append(w)
    words.append("cuda" if graph.device.startswith("cuda") else "cpu openmp")
    return " ".join(words + ([extra] if extra else []))


def retrieve(knowledge: Any, query: str, k: int) -> list[dict[str, Any]]:
    """Top-k sections as dicts {id, title, score, text}; [] without a knowledge base."""
    if knowledge is None or k <= 0:
        return []
    hits = []
    for h in knowledge.search(query, k):
        get = h.get if isinstance(h, dict) else (lambda name, d=None, h=h: getattr(h, name, d))
        text = get("text", None) or get("snippet", "") or ""
        if hasattr(knowledge, "section"):   # the whole section, not just the snippet
            with contextlib.suppress(Exception):   # a hit without a section keeps its snippet
                text = knowledge.section(get("id")).body
        if len(text) > SECTION_CHARS:
            text = text[:SECTION_CHARS].rsplit("\n", 1)[0] + "\n..."
        hits.append({"id": str(get("id")), "title": get("title", "") or "",
                     "score": round(float(get("score", 0.0) or 0.0), 3), "text": text})
    return hits


def default_knowledge() -> Any:
    """The project's knowledge base, or None when agents/rag.py is unavailable."""
    try:
        from ..rag import KnowledgeBase
    except ImportError:
        return None
    return KnowledgeBase.load()


def problem_context(problem: Problem, graph: Graph, sections: list[dict[str, Any]]) -> str:
    """The cached per-problem block: source, graph, eager profile, knowledge-base sections."""
    parts = [(f"# Problem `{problem.name}` on device `{graph.device}` "
              f"(kernels in {lang_for(graph.device)!r})"),
             "## Reference model (KernelBench contract)", fence(problem.source, "python"),
             "## Captured ATen graph", graph.summary().rstrip(),
             "## Eager profile", eager_profile(graph)]
    parts.append("## Knowledge-base sections (cite their ids in `refs`)")
    if sections:
        for s in sections:
            parts.append(f"### [{s['id']}] {s['title']}\n{s['text'].strip()}")
    else:
        parts.append("(none retrieved)")
    return "\n\n".join(parts) + "\n"


def eager_profile(graph: Graph, top: int = 12) -> str:
    lines = [f"eager forward: {graph.eager_ms:.3f} ms" if graph.eager_ms is not None
             else "eager forward: not measured"]
    timed = [n for n in graph.nodes if getattr(n, "time_us", None)]
    total = sum(n.time_us for n in timed) or 1.0
    for n in sorted(timed, key=lambda n: -n.time_us)[:top]:
        lines.append(f"- {n.name} ({n.target}, {n.op_class}, shape {n.shape}): "
                     f"{n.time_us:.1f} us, {n.time_us / total:.0%}")
    if not timed:
        lines.append("(no per-op times; use flops/bytes from the graph)")
    return "\n".join(lines)


def fence(code: str, lang: str = "") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"
