"""Every knob in one place.

Each field can be set by an environment variable ``STITCH_<FIELD>`` (upper case), by CLI
options, or by ``%config StitchMagics.<field> = ...`` in a notebook. Code never reads the
environment elsewhere: it takes a ``Settings`` object. Tests override with ``settings.replace``.

>>> s = Settings.from_env({"STITCH_TRIALS": "7"})
>>> s.trials
7
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def _default_cache_dir() -> str:
    # A checkout keeps its cache beside the code (kernels_cache/); an installed package
    # uses the user's cache folder.
    local = _PACKAGE_ROOT / "kernels_cache"
    if local.is_dir() and (_PACKAGE_ROOT / "pyproject.toml").exists():
        return str(local)
    return str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stitchcuda_lab")


def _default_sessions_dir() -> str:
    return str(Path.cwd() / "stitch_sessions")


@dataclass(frozen=True)
class Settings:
    device: str = "auto"            # auto | cpu | cuda | cuda:N
    agent: str = "offline"          # offline | claude | openai | hybrid
    iters: int = 3                  # refine iterations after the first candidate
    sessions_dir: str = field(default_factory=_default_sessions_dir)
    cache_dir: str = field(default_factory=_default_cache_dir)
    cache: bool = True              # kill switch for kernels_cache
    trials: int = 5                 # correctness trials, each on fresh inputs
    timing_trials: int = 20         # timed trials (median reported)
    warmup: int = 3
    atol: float | None = None       # None: per-dtype default (fp32 1e-4, fp16/bf16 1e-2)
    rtol: float | None = None
    seed: int = 42
    timeout: float = 300.0          # seconds for one worker job (build + check + time)
    compile_modes: str = "default"  # comma list: default,max-autotune-no-cudagraphs,reduce-overhead
    profile: bool = True
    ncu: bool = False               # per-kernel hardware counters (slow; GPU only)
    tensor_cores: bool = True       # large fp32 GEMMs may run as the fp32-accurate 3xTF32 split
    # --- LLM agents (none of these reach the Verifier's processes: see LLM_FIELDS)
    model: str = "claude-sonnet-5-5"
    max_tokens: int = 8192          # output budget of one reply
    max_tokens_limit: int = 32000   # a reply cut off at max_tokens is retried with up to this
    thinking: int = 4096            # Claude models: tokens to think before answering (0: off)
    temperature: float = 0.2
    base_url: str | None = None     # a Messages API (claude) or chat completions (openai) server
    llm_timeout: float = 120.0
    llm_retries: int = 4            # overloads, rate limits, broken streams: tries after the first
    llm_backoff: float = 2.0        # seconds before the first retry (doubles, 60 s at most)
    llm_repairs: int = 2            # invalid or repeated replies sent back to the model
    candidates: int = 1             # candidates sampled per iteration
    memory_tokens: int = 3000       # budget of the coder's summary of earlier attempts
    max_cost: float | None = None   # USD: no LLM request starts once the session spent this
    max_total_tokens: int | None = None   # tokens (in + out): the same, counted in tokens
    price: str | None = None        # "in,out[,cache_write,cache_read]" USD per million tokens
    rag_top_k: int = 4
    judge: bool = False             # LLM agents: an LLM judge scores verdicts beside the rules

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        """Defaults, then ``STITCH_*`` variables from ``env`` (os.environ by default), then overrides."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = "STITCH_" + f.name.upper()
            if key not in env:
                continue
            if env[key] == "":
                # An empty value means "none" where a field can be empty (STITCH_COMPILE_MODES=""
                # times no torch.compile baseline); numbers and switches keep their defaults.
                if str(f.type) == "str":
                    values[f.name] = ""
                elif "None" in str(f.type):
                    values[f.name] = None
                continue
            values[f.name] = _coerce(f, env[key], key)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def replace(self, **changes: Any) -> "Settings":
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}",
                              hint=f"known settings: {', '.join(f.name for f in fields(self))}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The LLM agents' configuration: never in the environment of a process that runs candidates.
LLM_FIELDS = ("agent", "model", "max_tokens", "max_tokens_limit", "thinking", "temperature",
              "base_url", "llm_timeout", "llm_retries", "llm_backoff", "llm_repairs",
              "candidates", "memory_tokens", "max_cost", "max_total_tokens", "price",
              "rag_top_k", "judge")
LLM_ENV = tuple("STITCH_" + name.upper() for name in LLM_FIELDS)


def _coerce(f: dataclasses.Field, raw: str, key: str) -> Any:
    kind = str(f.type)
    try:
        if kind.startswith("bool"):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a valid {kind.split(' ')[0]}",
                          hint=f"unset {key} or give it a {kind.split(' ')[0]} value") from None
    return raw
