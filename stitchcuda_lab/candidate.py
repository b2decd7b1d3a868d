"""The Coder's output: a Candidate program (kernels plus the ModelNew module that calls them).

>>> c = Candidate(program="class ModelNew: ...")
>>> Candidate.from_dict(c.to_dict()).id == c.id
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
from dataclasses import dataclass, field
from typing import Any

from .record import Record, Shown


@dataclass
class KernelSource(Record):
    """One kernel's source as a person reads and edits it."""

    name: str
    lang: str           # "cuda" (NVRTC device code) or "c" (cc -O3 -fopenmp)
    code: str
    entry: list[str] = field(default_factory=list)  # exported function names


@dataclass
class Candidate(Shown, Record):
    """A generated program: kernels plus the ModelNew module that calls them.

    ``program`` is Python source that refers to ``SOURCES[name]`` for each kernel;
    ``module_source()`` prepends the SOURCES table so the result is one self-contained file
    (KernelBench form, importing only torch and ``stitchcuda_lab.runtime``).
    ``replaced`` lists aten op names the candidate claims to compute itself (the Verifier
    rejects the candidate if they run anyway); ``kept`` lists library ops it may call.
    """

    id: str = ""
    program: str = ""
    kernels: list[KernelSource] = field(default_factory=list)
    iteration: int = 0
    parent: str | None = None
    origin: str = "offline"     # offline | claude | openai | user
    notes: str = ""
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id:
            self.id = self.digest()[:12]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Candidate:
        d = dict(d)
        d["kernels"] = [k if isinstance(k, KernelSource) else KernelSource.from_dict(k)
                        for k in d.get("kernels", [])]
        return super().from_dict(d)

    def digest(self) -> str:
        h = hashlib.sha256(self.program.encode())
        for k in self.kernels:
            h.update(b"\0" + k.name.encode() + b"\0" + k.lang.encode() + b"\0" + k.code.encode())
        return h.hexdigest()

    def module_source(self) -> str:
        if not self.kernels:
            return self.program
        table = ",\n".join(f"    {k.name!r}: {_pyraw(k.code)}" for k in self.kernels)
        langs = ", ".join(f"{k.name!r}: {k.lang!r}" for k in self.kernels)
        return (f"# stitchcuda-lab candidate {self.id} (iteration {self.iteration}, {self.origin})\n"
                f"SOURCES = {{\n{table},\n}}\nLANGS = {{{langs}}}\n\n{self.program}")

    def with_kernel(self, name: str, code: str, origin: str = "user") -> Candidate:
        """A new candidate with one kernel's code replaced (a person's edit)."""
        kernels = [dataclasses.replace(k, code=code) if k.name == name else k
                   for k in self.kernels]
        if not any(k.name == name for k in self.kernels):
            from .errors import UsageError
            raise UsageError(f"candidate {self.id} has no kernel {name!r}",
                             hint=f"kernels are: {', '.join(k.name for k in self.kernels)}")
        return dataclasses.replace(self, id="", kernels=kernels, parent=self.id, origin=origin)

    def __str__(self) -> str:
        ks = ", ".join(f"{k.name} ({k.lang}, {k.code.count(chr(10)) + 1} lines)" for k in self.kernels)
        return f"Candidate {self.id} (iteration {self.iteration}, {self.origin}): {ks or 'no kernels'}"

    def _repr_html_(self) -> str:
        parts = [f"<b>{html.escape(str(self))}</b>"]
        if self.notes:
            parts.append(f"<p>{html.escape(self.notes)}</p>")
        for k in self.kernels:
            parts.append(f"<details><summary>{html.escape(k.name)} ({html.escape(k.lang)})"
                         f"</summary><pre>{html.escape(k.code)}</pre></details>")
        return "<div>" + "".join(parts) + "</div>"


def _pyraw(code: str) -> str:
    if "'''" not in code and not code.endswith("\\"):
        return "r'''" + code + "'''"
    return repr(code)
