"""The Verifier's output: a Verdict on one candidate (status, errors, timings, profile).

>>> Verdict(status="pass", speedup_vs_eager=2.0).summary()
'pass; 2.00x vs eager'
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from .record import Record, Shown

VERDICT_STATUSES = ("pass", "incorrect", "rejected", "build_error", "runtime_error", "timeout")
LOAD_CHANGED = "host_load_changed"   # a flag: the CPU host's load moved while it was timed


# how a comparison's message says it scaled atol down to an output smaller than 1 (the
# verdict's tolerance is the one asked for)
SCALED_ATOL = "x the reference's root mean square"

BASELINES_RETIMED = "baselines_retimed"   # a flag: eager moved since the baselines (CPU)


def baselines_retimed(flags: Any) -> bool:
    """Whether a verdict's ``flags`` say its baselines were timed again in its job (the
    host's load had moved since they were first timed): its ratio compares loosely."""
    return any(str(f).startswith(BASELINES_RETIMED) for f in flags or [])


def load_changed(flags: Any) -> bool:
    """Whether a verdict's ``flags`` say the host's load changed between its baselines and
    the candidate's calls (CPU): its ratios then compare two loads and stand for nothing."""
    return any(str(f).startswith(LOAD_CHANGED) for f in flags or [])


@dataclass
class TrialResult(Record):
    seed: int
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatches: int = 0
    message: str = ""


@dataclass
class Verdict(Shown, Record):
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
    tolerance: str = ""                                       # which tolerance, and why
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

    @property
    def reason_name(self) -> str:
        """The named cause of a verdict (``out_of_memory``, ``patched_timer``...): the reason
        up to its first colon, when that is one word; "" otherwise."""
        name = self.reason.split(":", 1)[0].strip()
        return name if name and " " not in name else ""

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

    def shown_timings(self) -> list[tuple[str, float]]:
        """The timings a person reads, labelled, in ms: eager, each torch.compile mode, ours
        and the kernels' build. The rest of ``timings`` (the Verifier's phases, the sandbox's
        wall clock per call) stays in the JSON for whoever tunes the Verifier."""
        order = {"eager": 0, "ours": 2, "build": 3}
        shown = []
        for k, v in self.timings.items():
            if k.startswith("compile:"):
                shown.append((1, f"torch.compile ({k.split(':', 1)[1]})", v))
            elif k in order:
                label = {"ours": "ours (candidate)", "build": "build (kernels)"}.get(k, k)
                shown.append((order[k], label, v))
        return [(label, v) for _, label, v in sorted(shown)]

    def _repr_html_(self) -> str:
        color = {"pass": "#1a7f37"}.get(self.status, "#cf222e")
        t = "".join(f"<tr><td>{html.escape(k)}</td><td>{v:.4f} ms</td></tr>"
                    for k, v in self.shown_timings())
        return (f"<div><b style='color:{color}'>{html.escape(self.status)}</b> "
                f"{html.escape(self.summary()[len(self.status):].lstrip('; '))}"
                f"<table>{t}</table></div>")
