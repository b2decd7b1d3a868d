"""What a verification job is told: trials, tolerances, seeds, compile modes, what to profile."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class VerifyOptions:
    trials: int = 5
    timing_trials: int = 20
    warmup: int = 3
    atol: float | None = None
    rtol: float | None = None
    seed: int = 42
    compile_modes: str = "default"
    profile: bool = True
    ncu: bool = False
    time: bool = True

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> "VerifyOptions":
        values = {k: getattr(settings, k) for k in ("trials", "timing_trials", "warmup", "atol",
                                                      "rtol", "seed", "compile_modes", "profile",
                                                      "ncu")}
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)

    def modes(self) -> list[str]:
        return [m.strip() for m in self.compile_modes.split(",") if m.strip()]
