"""Compiler messages -> the lines of the kernel a person edits.

The Verifier's build log names the compiled file: ``k0_t1.c:124:50: error: ...`` (gcc, clang)
or ``k0_t1.cu(12): error: ...`` (NVRTC). The file is named after the kernel (the runtime's
safe name), and its lines are the kernel's own: C kernels are compiled as written, CUDA kernels
after a ``#line 1`` directive. ``offsets`` covers a build that puts lines in front of the
kernel (a prelude): compiled line ``n`` is kernel line ``n - offsets[kernel]``.

>>> log = "k0_t1.c:3:5: error: expected ';' before '}' token"
>>> [(d.kernel, d.line, d.col, d.severity) for d in parse(log, ["k0_t1"])]
[('k0_t1', 3, 5, 'error')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

_GCC = re.compile(r"^(?P<file>[^\s:()]+?\.(?:c|cc|cpp|cu|cuh|h|hpp)):(?P<line>\d+):"
                  r"(?:(?P<col>\d+):)?\s*(?P<sev>fatal error|error|warning|note):\s*(?P<msg>.*)$")
_NVRTC = re.compile(r"^(?P<file>[^\s()]+?)\((?P<line>\d+)\):\s*(?P<sev>catastrophic error|error"
                    r"|warning|remark|note)(?:\s*#[\w-]+)?:\s*(?P<msg>.*)$")
_SEVERITY = {"fatal error": "error", "catastrophic error": "error", "error": "error",
             "warning": "warning", "remark": "note", "note": "note"}


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message on a kernel line (1-based line and column, col 0 = unknown)."""

    kernel: str
    line: int
    col: int
    severity: str          # error | warning | note
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = f"{self.kernel}:{self.line}" + (f":{self.col}" if self.col else "")
        return f"{where}: {self.severity}: {self.message}"


def safe_name(name: str) -> str:
    """The file stem the builders give a kernel (``runtime.build._safe``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"


def parse(log: str, kernels: Iterable[str], *, offsets: Mapping[str, int] | None = None,
          lines: Mapping[str, int] | None = None) -> list[Diagnostic]:
    """The messages in ``log`` that name one of ``kernels``' files, on kernel lines.

    ``lines`` (kernel -> number of lines) clips a line past the end of the kernel to its last
    line, so a message about a missing closing brace still lands in the editor.
    """
    names = list(kernels)
    by_stem = {safe_name(n): n for n in names}
    offsets = offsets or {}
    out: list[Diagnostic] = []
    for raw in (log or "").splitlines():
        m = _GCC.match(raw.strip()) or _NVRTC.match(raw.strip())
        if m is None:
            continue
        stem = re.sub(r"\.[A-Za-z]+$", "", m["file"].rsplit("/", 1)[-1])
        kernel = by_stem.get(stem)
        if kernel is None:
            continue
        line = int(m["line"]) - int(offsets.get(kernel, 0))
        if line < 1:
            continue                      # inside a prelude the person does not edit
        if lines and kernel in lines:
            line = min(line, max(1, lines[kernel]))
        col = int(m.groupdict().get("col") or 0)
        out.append(Diagnostic(kernel, line, col, _SEVERITY[m["sev"]], m["msg"].strip()))
    return out
