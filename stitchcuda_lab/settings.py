"""Every knob in one place, and every variable the package reads from the environment.

Each field can be set by an environment variable ``STITCH_<FIELD>`` (upper case), by CLI
options, or by ``%config StitchMagics.<field> = ...`` in a notebook (the magic's traits are made
from these fields). Code never reads ``STITCH_*`` variables elsewhere: it takes a ``Settings``
object. Tests override with ``settings.replace``. The names of variables that hold credentials
(``looks_secret``) are written here too, once, for the worker, the validation process and the
session store.

>>> s = Settings.from_env({"STITCH_TRIALS": "7"})
>>> s.trials
7
>>> env_name("trials")
'STITCH_TRIALS'
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from .errors import ConfigError

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
PREFIX = "STITCH_"
AGENTS = ("offline", "claude", "openai", "hybrid")     # who plans and codes (agents/base.py)
# The Settings fields a verification job is told (verifier/options.py: VerifyOptions).
VERIFIER_KNOBS = ("trials", "timing_trials", "warmup", "atol", "rtol", "seed", "compile_modes",
                  "profile", "ncu", "gpu_lock", "cpu_flush_mb")
# Environment variables whose names say they hold a credential: never handed to the worker or
# the validation process, and their values never written to a session folder.
SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def _default_cache_dir() -> str:
    # A checkout keeps its cache beside the code (kernels_cache/); an installed package
    # uses the user's cache folder.
    local = _PACKAGE_ROOT / "kernels_cache"
    if local.is_dir() and (_PACKAGE_ROOT / "pyproject.toml").exists():
        return str(local)
    return str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stitchcuda_lab")


def _default_sessions_dir() -> str:
    return str(Path.cwd() / "stitch_sessions")


def _knob(default: Any = None, doc: str = "", *, factory: Any = None,
          secret: bool = False) -> Any:
    """A Settings field with its one line of help; ``secret``: its value may carry
    credentials (a URL's userinfo) and is left out of what a session records."""
    meta = {"help": doc, "secret": secret}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    device: str = _knob("auto", "where candidates run: auto | cpu | cuda | cuda:N")
    agent: str = _knob("offline", "who plans and codes: " + " | ".join(AGENTS))
    iters: int = _knob(3, "refine iterations after the first candidate")
    sessions_dir: str = _knob(factory=_default_sessions_dir, doc="sessions root folder")
    cache_dir: str = _knob(factory=_default_cache_dir, doc="kernel cache folder")
    cache: bool = _knob(True, "use the kernel cache (off: build every time)")
    cache_max_mb: int = _knob(2048, "kernel cache size bound in MB: the least recently used "
                                    "entries go past it (0: no bound)")
    trials: int = _knob(5, "correctness trials, each on fresh inputs")
    timing_trials: int = _knob(20, "timed trials (the median is reported)")
    warmup: int = _knob(3, "warm-up runs before timing")
    atol: float | None = _knob(None, "absolute tolerance (none: per dtype, fp32 1e-4, "
                                     "fp16/bf16 1e-2)")
    rtol: float | None = _knob(None, "relative tolerance (none: per dtype)")
    seed: int = _knob(42, "base seed")
    timeout: float = _knob(300.0, "seconds for one worker job (build + check + time)")
    compile_modes: str = _knob("default", "torch.compile baselines, comma list ('' for none): "
                                          "default, max-autotune-no-cudagraphs, reduce-overhead")
    profile: bool = _knob(True, "record timelines")
    ncu: bool = _knob(False, "per-kernel hardware counters from Nsight Compute (GPU, slow)")
    gpu_lock: str = _knob("", "lock file of a GPU that several problems share (bench --jobs): "
                              "timed work takes it alone (gpulock.py); '' when not shared")
    cpu_flush_mb: int = _knob(0, "CPU timing: MB written before each timed call to push the "
                                 "last call's data out of the caches (0: twice the last-level "
                                 "cache, 256 at most)")
    tensor_cores: bool = _knob(True, "large fp32 GEMMs may run as the fp32-accurate 3xTF32 "
                                     "split")
    # --- LLM agents (none of these reach the Verifier's processes: see LLM_ENV)
    model: str = _knob("claude-sonnet-5-5", "LLM model name")
    max_tokens: int = _knob(8192, "most tokens in one LLM reply")
    max_tokens_limit: int = _knob(32000, "a reply cut off at max_tokens is asked again with up "
                                         "to this budget")
    thinking: int = _knob(4096, "Claude models: tokens to think before answering (0: off)")
    temperature: float = _knob(0.2, "LLM sampling temperature")
    base_url: str | None = _knob(None, "LLM server URL: a Messages API (claude) or chat "
                                       "completions (openai) server", secret=True)
    llm_timeout: float = _knob(120.0, "seconds for one LLM request")
    llm_retries: int = _knob(4, "overloads, rate limits, broken streams: tries after the first")
    llm_backoff: float = _knob(2.0, "seconds before the first retry (doubles, 60 s at most)")
    llm_repairs: int = _knob(2, "invalid or repeated replies sent back to the model")
    candidates: int = _knob(1, "candidates sampled per iteration")
    memory_tokens: int = _knob(3000, "budget of the coder's summary of earlier attempts")
    max_cost: float | None = _knob(None, "USD: no LLM request starts once the session spent "
                                         "this")
    max_total_tokens: int | None = _knob(None, "tokens (in + out): the same, counted in tokens")
    price: str | None = _knob(None, "'in,out[,cache_write,cache_read]' USD per million tokens")
    rag_top_k: int = _knob(4, "knowledge-base sections retrieved per prompt")
    rag_dir: str | None = _knob(None, "knowledge-base folder of <id>.md sections (none: the "
                                      "rag_docs/ shipped with the package)")
    judge: bool = _knob(False, "LLM agents: an LLM judge scores verdicts beside the rules")

    def __post_init__(self) -> None:
        if self.cache_max_mb < 0:
            raise ConfigError(f"cache_max_mb={self.cache_max_mb} is negative",
                              hint="give a size in MB, or 0 for no bound")
        if self.cpu_flush_mb < 0:
            raise ConfigError(f"cpu_flush_mb={self.cpu_flush_mb} is negative",
                              hint="give 0 (twice the last-level cache, 256 MB at most) or a "
                                   "size in MB")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``STITCH_*`` variables from ``env`` (os.environ by default), then overrides."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = env_name(f.name)
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

    def replace(self, **changes: Any) -> Settings:
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}",
                              hint=f"known settings: {', '.join(f.name for f in fields(self))}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def public_dict(self) -> dict[str, Any]:
        """``as_dict`` less the fields whose values may carry credentials (what a session
        records)."""
        return {k: v for k, v in self.as_dict().items() if not _FIELDS[k].metadata["secret"]}

    @staticmethod
    def describe(name: str) -> str:
        """The one line of help of a field (the magic's ``%config`` help)."""
        return _FIELDS[name].metadata["help"]


_FIELDS = {f.name: f for f in fields(Settings)}


def env_name(name: str) -> str:
    """The environment variable of a Settings field: ``cache_dir`` -> ``STITCH_CACHE_DIR``."""
    if name not in _FIELDS:
        raise ConfigError(f"unknown setting {name!r}",
                          hint=f"known settings: {', '.join(_FIELDS)}")
    return PREFIX + name.upper()


def looks_secret(name: str) -> bool:
    """True for environment variable names that hold credentials (API keys, tokens, passwords).

    >>> looks_secret("ANTHROPIC_API_KEY"), looks_secret("HF_TOKEN"), looks_secret("PATH")
    (True, True, False)
    """
    return SECRET_NAME.search(name) is not None


def public_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment (``os.environ`` by default) less every variable that ``looks_secret``:
    what a child process that runs user or generated code is started with."""
    env = os.environ if base is None else base
    return {k: v for k, v in env.items() if not looks_secret(k)}


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values (8+ characters, longest first) of the variables that ``looks_secret``: the
    strings a session folder never holds."""
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if looks_secret(k) and len(v) >= 8},
                  key=len, reverse=True)


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
