"""What a session's LLM exchanges cost: tokens (input, cached, output) and USD, summed.

Every ``llm_exchange`` record carries its ``usage`` (Messages API field names) and, when the
model is priced, ``cost_usd``; failed and broken exchanges are recorded too, so their tokens
count. ``Spend`` sums them per session, per iteration ("plan" for the planner) and per role;
the CLI's progress lines and ``--json``, the notebook panel and the caps read it. Pure.

>>> s = Spend.from_exchanges([{"role": "coder", "iteration": 0, "cost_usd": 0.02,
...     "usage": {"input_tokens": 1000, "cache_read_input_tokens": 4000, "output_tokens": 500}}])
>>> s.total.line()
'5.5k tokens (1.0k in, 4.0k cached, 500 out), $0.0200'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    """Token and cost totals over some exchanges."""

    input_tokens: int = 0          # uncached input
    cache_write_tokens: int = 0    # input written to the prompt cache
    cache_read_tokens: int = 0     # input read from the prompt cache
    output_tokens: int = 0
    cost_usd: float = 0.0          # over the priced exchanges
    exchanges: int = 0
    unpriced: int = 0              # exchanges whose model has no known price

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens + self.cache_write_tokens + self.cache_read_tokens
                + self.output_tokens)

    def add(self, payload: dict[str, Any]) -> None:
        u = payload.get("usage") or {}
        self.input_tokens += int(u.get("input_tokens") or 0)
        self.cache_write_tokens += int(u.get("cache_creation_input_tokens") or 0)
        self.cache_read_tokens += int(u.get("cache_read_input_tokens") or 0)
        self.output_tokens += int(u.get("output_tokens") or 0)
        self.exchanges += 1
        cost = payload.get("cost_usd")
        if cost is None:
            self.unpriced += 1
        else:
            self.cost_usd += float(cost)

    def to_dict(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "cache_write_tokens": self.cache_write_tokens,
                "cache_read_tokens": self.cache_read_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens, "cost_usd": round(self.cost_usd, 6),
                "exchanges": self.exchanges, "unpriced_exchanges": self.unpriced}

    def line(self) -> str:
        """``12.3k tokens (1.0k in, 11.0k cached, 300 out), $0.0123`` for progress lines."""
        cached = self.cache_read_tokens + self.cache_write_tokens
        if self.exchanges and self.unpriced == self.exchanges:
            cost = "cost unknown (unpriced model)"
        else:
            cost = f"${self.cost_usd:.4f}" + (f" (+{self.unpriced} unpriced)" if self.unpriced
                                               else "")
        return (f"{_k(self.total_tokens)} tokens ({_k(self.input_tokens)} in, {_k(cached)} "
                f"cached, {_k(self.output_tokens)} out), {cost}")


@dataclass
class Spend:
    """A session's spend: the total, per iteration and per role."""

    total: Usage = field(default_factory=Usage)
    by_iteration: dict[str, Usage] = field(default_factory=dict)
    by_role: dict[str, Usage] = field(default_factory=dict)

    @classmethod
    def from_exchanges(cls, payloads: Iterable[dict[str, Any]]) -> Spend:
        s = cls()
        for p in payloads:
            s.add(p)
        return s

    def add(self, payload: dict[str, Any]) -> None:
        self.total.add(payload)
        self.by_iteration.setdefault(iteration_key(payload), Usage()).add(payload)
        self.by_role.setdefault(str(payload.get("role") or "?"), Usage()).add(payload)

    def to_dict(self) -> dict[str, Any]:
        return {**self.total.to_dict(),
                "by_iteration": {k: u.to_dict() for k, u in self.by_iteration.items()},
                "by_role": {k: u.to_dict() for k, u in self.by_role.items()}}


def iteration_key(payload: dict[str, Any]) -> str:
    """``"plan"`` for exchanges outside an iteration (the planner), else the iteration."""
    it = payload.get("iteration")
    return "plan" if it is None else str(it)


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
