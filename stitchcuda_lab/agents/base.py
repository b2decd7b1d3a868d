"""The contract every agent fills: a Planner makes a Plan, a Coder makes Candidates.

Planners and Coders see only data (Problem, Graph, Plan, Verdict): they never run generated
code themselves; the Verifier does that in its worker.

The Session takes any object that fits these protocols (``Session.create(planner=, coder=)``)
and type checking holds the offline and LLM agents to them. Beyond them an agent may have, and
the Session looks for each with ``getattr``:

- ``recorder``, ``progress``, ``facts``, ``guard`` left None: the Session sets them (record
  each LLM exchange, show progress, read its measured facts, check its spending caps);
- a Coder's ``attempts`` keyword on ``code``: every try so far (``loop.Attempt``) is passed;
- a Coder's ``why_empty``: why it returned no candidate; ``stops_early = False``: run to
  ``--iters`` even when a refine round gains nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..errors import ConfigError
from ..settings import AGENTS

if TYPE_CHECKING:
    from ..graph import Graph
    from ..candidate import Candidate
    from ..plan import Plan
    from ..verdict import Verdict
    from ..problem import Problem
    from ..settings import Settings


class Planner(Protocol):
    name: str

    def plan(self, problem: Problem, graph: Graph, settings: Settings) -> Plan:
        """Propose a todo list for this problem on ``graph.device``."""


class Coder(Protocol):
    name: str

    def code(self, problem: Problem, graph: Graph, plan: Plan, settings: Settings, *,
             iteration: int, previous: Candidate | None = None,
             feedback: Verdict | None = None) -> list[Candidate]:
        """Candidates for the approved plan: iteration 0 is the first version; later iterations
        get the best candidate so far and its verdict and return variants to measure."""


def get_agents(name: str, settings: Settings) -> tuple[Planner, Coder]:
    """The Planner and Coder for an agent name (``offline`` needs no network; the others are
    the LLM agents)."""
    if name not in AGENTS:
        raise ConfigError(f"unknown agent {name!r}", hint=f"use one of: {', '.join(AGENTS)}")
    if name == "offline":
        from .offline import OfflineCoder, OfflinePlanner
        return OfflinePlanner(), OfflineCoder()
    from .llm import make_agents
    return make_agents(name, settings)
