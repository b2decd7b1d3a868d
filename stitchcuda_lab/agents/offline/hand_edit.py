"""Refining a person's edit: the offline Coder's variants merged into the edited code.

A hand-edited candidate keeps the launch parameters of the version it was edited from
(``params["tasks"]``). The Coder rebuilds that version from its templates (the base), writes
each variant from the same templates, and carries the variant's change into the person's code
with a three-way merge. A variant whose changed lines the person left alone (a block size in
``__launch_bounds__``, items per thread, a chunk size, the grid in the program) keeps every
edited line; a variant that touches an edited line is dropped and named, never applied over
the person's code. Variants carry ``params["hand_edit"]``, so later rounds merge again.

>>> merge3("a\\nb\\nc\\n", "a\\nB\\nc\\n", "a\\nb\\nC\\n")
'a\\nB\\nC\\n'
>>> merge3("a\\nb\\n", "a\\nX\\n", "a\\nY\\n") is None
True
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import TYPE_CHECKING, Any

from ...candidate import Candidate

if TYPE_CHECKING:
    from ...graph import Graph
    from ...plan import Plan
    from ...verdict import Verdict
    from ...problem import Problem

MAX_VARIANTS = 4


def hand_edited(c: Candidate) -> bool:
    """True for a person's edit and for variants merged into one."""
    return c.origin == "user" or bool(c.params.get("hand_edit"))


def _hunks(a: list[str], b: list[str]) -> list[tuple[int, int, list[str]]]:
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(i1, i2, b[j1:j2]) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]


def merge3(base: str, ours: str, theirs: str) -> str | None:
    """``base`` with both ``ours`` and ``theirs`` changes, or None when they touch the same or
    adjacent lines (line-based, like diff3 without conflict markers)."""
    if theirs == base or ours == theirs:
        return ours
    if ours == base:
        return theirs
    b = base.splitlines(keepends=True)
    mine = _hunks(b, ours.splitlines(keepends=True))
    other = [h for h in _hunks(b, theirs.splitlines(keepends=True)) if h not in mine]
    for i1, i2, _ in other:
        for k1, k2, _ in mine:
            if i1 <= k2 and k1 <= i2:      # overlapping or touching: the person's lines win
                return None
    out = list(b)
    for i1, i2, lines in sorted(mine + other, key=lambda h: (h[0], h[1]), reverse=True):
        out[i1:i2] = lines
    return "".join(out)


def conflict_lines(base: str, ours: str, theirs: str) -> list[int]:
    """1-based lines of ``ours`` the person edited that ``theirs`` would also change."""
    b = base.splitlines(keepends=True)
    o = ours.splitlines(keepends=True)
    sm = difflib.SequenceMatcher(None, b, o, autojunk=False)
    mine = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal"]
    lines: set[int] = set()
    for i1, i2, _ in _hunks(b, theirs.splitlines(keepends=True)):
        for k1, k2, j1, j2 in mine:
            if i1 <= k2 and k1 <= i2:
                lines.update(range(j1 + 1, max(j1, j2 - 1) + 2))
    return sorted(lines)


def refine_hand_edit(coder: Any, problem: Problem, graph: Graph, plan: Plan, edit: Candidate,
                     iteration: int, feedback: Verdict | None) -> tuple[list[Candidate], str]:
    """Up to four variants of ``edit`` that keep the person's code, and a sentence saying what
    was kept and what was dropped (the reason when there is no variant)."""
    base_params = dict(edit.params.get("tasks", {}))
    root = edit.params.get("hand_edit") or edit.id
    if not base_params:
        return [], (f"the offline coder cannot refine the hand edit {edit.id}: it was not made "
                    "from an offline candidate, so there are no template parameters to vary")
    base = coder.candidate(problem, graph, plan, base_params, iteration=iteration)
    ours = {k.name: k for k in edit.kernels}
    if {k.name for k in base.kernels} != set(ours):
        return [], (f"the offline coder cannot refine the hand edit {edit.id}: its kernels "
                    f"({', '.join(sorted(ours))}) are not the ones its templates write for this "
                    f"plan ({', '.join(k.name for k in base.kernels) or 'none'})")
    base_code = {k.name: k.code for k in base.kernels}
    edited = sorted(n for n in ours if ours[n].code != base_code[n])
    out: list[Candidate] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for it in range(iteration, iteration + 8):      # rotate through the pool of variants
        for label, tparams in coder.variants(graph, plan, base_params, it, feedback):
            if label in seen or len(out) >= MAX_VARIANTS:
                continue
            seen.add(label)
            v = coder.candidate(problem, graph, plan, tparams, iteration=iteration,
                                parent=edit.id, variant=label)
            theirs = {k.name: k for k in v.kernels}
            if set(theirs) != set(ours):
                dropped.append(f"{label} (it would drop your kernel)")
                continue
            kernels, clash = [], []
            for name, k in ours.items():
                merged = merge3(base_code[name], k.code, theirs[name].code)
                if merged is None:
                    lines = conflict_lines(base_code[name], k.code, theirs[name].code)
                    clash.append(f"{name} line(s) {_ranges(lines)}")
                    continue
                kernels.append(dataclasses.replace(theirs[name], code=merged))
            if clash:
                dropped.append(f"{label} (it changes what you edited: {', '.join(clash)})")
                continue
            note = (f"keeps your edit of {', '.join(edited) or 'the kernels'} (from {root}); "
                    f"varies {label}")
            c = dataclasses.replace(
                v, id="", kernels=kernels, parent=edit.id,
                notes=(v.notes + "\n" if v.notes else "") + note,
                params={**v.params, "variant": f"{label}, on your edit", "hand_edit": root})
            if c.digest() != edit.digest() and all(c.digest() != o.digest() for o in out):
                out.append(c)
        if len(out) >= MAX_VARIANTS:
            break
    if out:
        why = f"{len(out)} variant(s) of your edit {edit.id}, each keeping your code"
        if dropped:
            why += "; not tried: " + "; ".join(dropped[:4])
        return out, why
    if not seen:
        return [], (f"the offline coder has nothing to vary around the hand edit {edit.id}: "
                    "the plan leaves it no launch or template parameter")
    clash = any("changes what you edited" in d for d in dropped)
    return [], (f"the offline coder cannot refine the hand edit {edit.id} without undoing it: "
                + ("every variant it knows changes lines you edited: " if clash else
                   "it has no variant that keeps your kernel here: ")
                + "; ".join(dropped[:4]) + "; your edit stays a verified version of the session")


def _ranges(lines: list[int]) -> str:
    if not lines:
        return "?"
    out, start, prev = [], lines[0], lines[0]
    for n in lines[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)
