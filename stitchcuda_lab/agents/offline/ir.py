"""The offline compiler's IR: one kernel as operands and a list of statements.

A ``KernelSpec`` iterates ``dims`` (outermost first); ``reduce`` marks the dims reduced inside a
row. Statements load an operand, compute an expression, reduce a per-element value to one per
row, scan it (a running sum or product along the row: one value per element), pool it (max or
average over a window of the input, ``pool.py``: one value per output element), or store.
``level`` says whether a value is per element (``full``), per row (``row``) or, in a pooling
kernel, per element of the pooled input (``win``: read inside the window loop);
``passno`` orders the passes a row kernel makes over its row. Lowering (``lower.py``) builds
it, the passes (``passes.py``) finish it, the backends print it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


class Unsupported(Exception):
    """This group cannot become one generated kernel; ``str(e)`` says why."""


@dataclass
class Operand:
    name: str                  # kernel parameter name
    node: str                  # graph node holding the tensor
    dtype: str
    shape: list[int]           # the tensor's own shape
    strides: list[int] = field(default_factory=list)  # element strides over the kernel dims
    role: str = "in"           # in | out | inout
    row: bool = False          # varies only over row dims
    layout: str = ""           # torch memory format it is read or written in ("" contiguous)


@dataclass
class Stmt:
    op: str                    # load | expr | reduce | scan | pool | store
    var: str = ""
    expr: str = ""
    deps: list[str] = field(default_factory=list)
    level: str = "full"        # full | row | win
    operand: int = -1          # load/store: operand index
    kind: str = ""             # pool: max | avg; reduce: sum | max | min | prod | argmax | argmin | welford | softmax
    outs: dict = field(default_factory=dict)  # reduce: role -> var (sum/max/idx/mean/m2/m/s)
    ctype: str = ""            # value type when not the accumulator type ("long long")
    passno: int = 0
    reverse: bool = False      # scan: from the row's last element to its first
    window: dict = field(default_factory=dict)   # pool: its geometry (pool.pool_window)


@dataclass
class KernelSpec:
    name: str
    kind: str                  # pointwise | rowwise | pool
    dims: list[int]            # iteration sizes, outermost first
    reduce: list[bool]         # per dim: reduced inside a row
    acc: str                   # float | double
    operands: list[Operand]
    stmts: list[Stmt]
    ops: list[str]             # graph nodes computed
    targets: list[str]         # their aten targets
    outputs: dict = field(default_factory=dict)   # graph node -> operand index written
    npasses: int = 0
    # a pool read and written channels-last (``layout.to_channels_last``): its outputs are
    # walked channel innermost, in memory order, its dims left in NCHW order
    channels_inner: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.dims) if self.dims else 1

    @property
    def rows(self) -> int:
        return math.prod(d for d, r in zip(self.dims, self.reduce) if not r) if self.dims else 1

    @property
    def rowlen(self) -> int:
        return math.prod(d for d, r in zip(self.dims, self.reduce) if r) if self.dims else 1

    def stmt_of(self, var: str) -> Stmt:
        for s in self.stmts:
            if s.var == var or var in s.outs.values():
                return s
        raise KeyError(var)


def deps_closure(spec: KernelSpec, roots: list[str]) -> list[Stmt]:
    """Statements (in order) needed to compute ``roots``; reductions count as inputs."""
    need: set[str] = set(roots)
    changed = True
    while changed:
        changed = False
        for s in spec.stmts:
            if s.op in ("load", "expr") and s.var in need:
                for d in s.deps:
                    if d not in need:
                        need.add(d)
                        changed = True
    return [s for s in spec.stmts if s.op in ("load", "expr") and s.var in need]
