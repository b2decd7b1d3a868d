"""The shape every record the loop passes around shares: JSON round trips and Jupyter display.

A leaf: nothing of the package, no torch, no IPython.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

_R = TypeVar("_R", bound="Record")


class Shown:
    """Jupyter display: the short ``str`` as plain text (papermill and terminals show no
    dataclass dumps) beside the class's ``_repr_html_``."""

    if TYPE_CHECKING:
        def _repr_html_(self) -> str:
            """Every class that is Shown writes its own."""

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


class Record:
    """to_dict / from_dict / to_json for nested dataclasses."""

    # A mixin for dataclasses: what ``dataclasses.fields`` and ``asdict`` look for (declared
    # only; the dataclass decorator sets it on each subclass).
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, **kw)

    @classmethod
    def from_dict(cls: type[_R], d: dict[str, Any]) -> _R:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls: type[_R], s: str) -> _R:
        return cls.from_dict(json.loads(s))
