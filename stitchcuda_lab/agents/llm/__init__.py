"""LLM agents: Claude (``anthropic``), any OpenAI-compatible server, and replay.

``make_agents(name, settings)`` returns the (Planner, Coder) pair for ``claude``, ``openai``
or ``hybrid`` (offline planner and first candidate, Claude for the refinements). Both agents
expose ``recorder`` (called with each exchange's payload, for ``llm_exchange`` session events)
and ``progress`` (called with streaming progress dicts); the session sets them.

>>> from stitchcuda_lab.agents import get_agents                      # doctest: +SKIP
>>> planner, coder = get_agents("claude", settings)                     # doctest: +SKIP
>>> planner.recorder = lambda payload: store.append("llm_exchange", payload)   # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from .coder import LLMCoder
from .planner import _UNSET, LLMPlanner
from .replay import ReplayClient, load_exchanges
from .reviewer import LLMReviewer
from .structured import Progress, Recorder, StructuredClient

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ...graph import Graph
    from ...loop import Attempt
    from ...candidate import Candidate
    from ...plan import Plan
    from ...verdict import Verdict
    from ...problem import Problem
    from ...settings import Settings
    from ..offline import OfflineCoder, OfflinePlanner

_SDKS = {"claude": "anthropic", "openai": "openai"}     # provider -> the LLM extra's SDK

__all__ = ["HybridCoder", "LLMCoder", "LLMPlanner", "LLMReviewer", "ReplayClient",
           "load_exchanges", "make_agents", "make_client", "make_replay_agents"]


def make_client(provider: str, settings: Settings, *, recorder: Recorder | None = None,
                progress: Progress | None = None, **kw: Any) -> StructuredClient:
    """A live structured client: ``claude`` or ``openai`` (``kw``: max_retries, http_client)."""
    from ...errors import ConfigError
    if provider not in _SDKS:
        raise ConfigError(f"unknown LLM provider {provider!r}", hint="use claude or openai")
    if importlib.util.find_spec(_SDKS[provider]) is None:     # the optional extra
        raise ConfigError(f"the {provider!r} agent needs the LLM extra ({_SDKS[provider]} is "
                          "not installed)", hint="pip install 'stitchcuda-lab[llm]'")
    if provider == "claude":
        from .client import ClaudeClient
        return ClaudeClient(settings, recorder=recorder, progress=progress, **kw)
    from .openai_client import OpenAIClient
    return OpenAIClient(settings, recorder=recorder, progress=progress, **kw)


def make_agents(name: str, settings: Settings, *, client: StructuredClient | None = None,
                recorder: Recorder | None = None, progress: Progress | None = None,
                knowledge: Any = _UNSET, **client_kw: Any
                ) -> tuple[LLMPlanner | OfflinePlanner, LLMCoder | HybridCoder]:
    """The (Planner, Coder) for ``claude``, ``openai`` or ``hybrid``.

    ``client`` replaces the live provider (a ``ReplayClient``, or one built with a test
    ``http_client``); ``knowledge`` replaces the default knowledge base (None: no retrieval).
    """
    provider = "openai" if name == "openai" else "claude"
    if client is None:
        client = make_client(provider, settings, recorder=recorder, progress=progress,
                             **client_kw)
    else:
        client.recorder = recorder if recorder is not None else client.recorder
        client.progress = progress if progress is not None else client.progress
    coder = LLMCoder(client, knowledge=knowledge, name=provider)
    if name == "hybrid":
        from ..offline import OfflineCoder, OfflinePlanner
        return OfflinePlanner(), HybridCoder(OfflineCoder(), coder)
    if name not in ("claude", "openai"):
        from ...errors import ConfigError
        raise ConfigError(f"unknown LLM agent {name!r}", hint="use claude, openai or hybrid")
    return LLMPlanner(client, knowledge=knowledge, name=provider), coder


def make_replay_agents(source: Any, *, recorder: Recorder | None = None,
                       knowledge: Any = None) -> tuple[LLMPlanner, LLMCoder]:
    """Agents that answer from a recorded session (folder, events file or events)."""
    client = ReplayClient.from_session(source, recorder=recorder)
    return (LLMPlanner(client, knowledge=knowledge, name="claude"),
            LLMCoder(client, knowledge=knowledge, name="claude"))


class HybridCoder:
    """Offline templates write the first candidate; the LLM refines from iteration 1 on."""

    name = "hybrid"

    def __init__(self, offline: OfflineCoder, llm: LLMCoder):
        self.offline, self.llm = offline, llm

    stops_early = False
    recorder = property(lambda self: self.llm.recorder,
                        lambda self, fn: setattr(self.llm, "recorder", fn))
    progress = property(lambda self: self.llm.progress,
                        lambda self, fn: setattr(self.llm, "progress", fn))
    facts = property(lambda self: self.llm.facts,
                     lambda self, fn: setattr(self.llm, "facts", fn))
    guard = property(lambda self: self.llm.guard,
                     lambda self, fn: setattr(self.llm, "guard", fn))

    def code(self, problem: Problem, graph: Graph, plan: Plan, settings: Settings, *,
             iteration: int, previous: Candidate | None = None,
             feedback: Verdict | None = None,
             attempts: Sequence[Attempt] | None = None) -> list[Candidate]:
        if iteration == 0:
            first = self.offline.code(problem, graph, plan, settings, iteration=0,
                                      previous=previous, feedback=feedback)
            if first:
                return first
        return self.llm.code(problem, graph, plan, settings, iteration=iteration,
                             previous=previous, feedback=feedback, attempts=attempts)
