"""Where a checked call's outputs travel: the candidate's process places them in the arena
where they fit and writes the rest as files (``Harness.send``); the judge copies the arena's
out at once and leaves file entries to ``read`` (``Job.from_arena``). The arena itself is CUDA
memory (tests/verifier/test_arena.py, ``gpu``); here it lies over a host buffer."""

from __future__ import annotations

import types

import torch

from stitchcuda_lab.verifier.arena import ALIGN, Arena
from stitchcuda_lab.verifier.exchange import Pinned
from stitchcuda_lab.verifier.sandbox import Harness
from stitchcuda_lab.verifier.verify import MAX_OUTPUTS, Job


def _arena(nbytes: int) -> Arena:
    """The sandbox's side of an arena over a host buffer (no driver), as test_arena.py's."""
    box = Arena.__new__(Arena)
    box.device, box.nbytes, box.whole = "cpu", nbytes, torch.zeros(nbytes, dtype=torch.uint8)
    return box


def _harness(tmp_path, arena):
    return types.SimpleNamespace(arena=arena, out_dir=tmp_path)


def test_without_an_arena_every_output_is_a_file(tmp_path):
    h = _harness(tmp_path, None)
    (entries,) = Harness.send(h, [[torch.ones(4), torch.zeros(2, 3)]], "t0")
    assert [sorted(e) for e in entries] == [["dtype", "nbytes", "path", "shape"]] * 2
    assert all((tmp_path / e["path"]).exists() for e in entries)


def test_outputs_past_the_arena_are_files_and_the_second_call_follows_the_first(tmp_path):
    h = _harness(tmp_path, _arena(512))
    (first,) = Harness.send(h, [[torch.ones(8), torch.ones(100)]], "t1")
    assert first[0]["at"] == 0 and "path" in first[1]   # 400 bytes from 256 pass 512
    (second,) = Harness.send(h, [[torch.ones(8)]], "t1b", after=True)
    assert second[0]["at"] == ALIGN                      # past the first's, not over it
    (third,) = Harness.send(h, [[torch.ones(8)]], "t1c", after=True)
    assert "path" in third[0]                            # the arena is full by now


def test_the_judge_copies_arena_entries_out_and_leaves_files_to_read():
    taken = []

    class Mapped:
        def take(self, entries, copy=True):   # one call for a reply's entries: it bounds their total
            taken.append(list(entries))
            return [Pinned([2], "float32", host=torch.zeros(8, dtype=torch.uint8))
                    for _ in entries]

    job = types.SimpleNamespace(arena_mapped=True, arena=Mapped())
    arena_entry, file_entry = {"at": 0, "nbytes": 8, "shape": [2], "dtype": "float32"}, \
        {"path": "/x/t0_0.bin", "shape": [2], "dtype": "float32"}
    got = Job.from_arena(job, [arena_entry, file_entry, arena_entry])
    assert isinstance(got[0], Pinned) and got[1] is file_entry and isinstance(got[2], Pinned)
    assert taken == [[arena_entry, arena_entry]]
    # more entries than any call may return: nothing copied, ``read`` refuses the count
    many = [arena_entry] * (MAX_OUTPUTS + 1)
    assert Job.from_arena(job, many) is many and len(taken) == 1
    # no arena in use: entries go to ``read`` as they are, which refuses all but files
    job.arena_mapped = False
    assert Job.from_arena(job, [arena_entry]) == [arena_entry]

