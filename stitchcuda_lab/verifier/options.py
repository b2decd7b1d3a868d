"""What a verification job is told: trials, tolerances, seeds, compile modes, what to profile.

``VerifyOptions`` is made from the Settings fields named in ``settings.VERIFIER_KNOBS`` (same
names, types and defaults, declared once in settings.py), plus ``time`` (whether the job times
the candidate at all) and ``first`` (whether it works towards the problem's first verdict,
which a shared GPU serves first: ``gpulock``), which are the job's own.

>>> VerifyOptions().trials == Settings().trials
True
>>> VerifyOptions.from_settings(Settings(trials=7), time=False).to_dict()["trials"]
7
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, field, fields, make_dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..settings import VERIFIER_KNOBS, Settings

_O = TypeVar("_O", bound="_Options")


class _Options:
    """What every VerifyOptions can do; its fields come from Settings (below)."""

    # declared only: VerifyOptions is the dataclass (what ``asdict`` looks for), and
    # ``modes`` reads its compile_modes
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    compile_modes: str

    @classmethod
    def from_settings(cls: type[_O], settings: Any, **overrides: Any) -> _O:
        values = {k: getattr(settings, k) for k in VERIFIER_KNOBS}
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def modes(self) -> list[str]:
        return [m.strip() for m in self.compile_modes.split(",") if m.strip()]


if TYPE_CHECKING:
    class VerifyOptions(_Options):
        """What the type checker sees: the fields are made from Settings at run time (below),
        so it knows their names and types no better than ``Any``."""

        def __init__(self, **knobs: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...
else:
    _KNOBS = {f.name: f for f in fields(Settings) if f.name in VERIFIER_KNOBS}
    VerifyOptions = make_dataclass(
        "VerifyOptions",
        [(name, _KNOBS[name].type, field(default=_KNOBS[name].default))
         for name in VERIFIER_KNOBS] + [("time", "bool", field(default=True)),
                                         ("first", "bool", field(default=False))],
        bases=(_Options,))
    VerifyOptions.__module__ = __name__      # make_dataclass's module= needs Python 3.12
    VerifyOptions.__doc__ = ("The Verifier knobs of one job: " + ", ".join(VERIFIER_KNOBS)
                             + " (as in Settings), time, and first (towards the problem's "
                             "first verdict: served first on a shared GPU, gpulock.py).")
