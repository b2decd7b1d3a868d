"""The shape every record the loop passes around shares: JSON round trips and Jupyter display.

A leaf: nothing of the package, no torch, no IPython.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any


class Shown:
    """Jupyter display: the short ``str`` as plain text (papermill and terminals show no
    dataclass dumps) beside the class's ``_repr_html_``."""

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}  # type: ignore


class Record:
    """to_dict / from_dict / to_json for nested dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[arg-type]

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls, s: str):
        return cls.from_dict(json.loads(s))
