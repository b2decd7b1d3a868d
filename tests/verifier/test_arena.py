"""The CUDA arena (verifier/arena.py): a timed call's tensors laid out by the sandbox, taken out
by the judge, every entry the sandbox sends checked against the arena's bounds and its shape.

The layout and the checks are the same on any device: here over one host tensor both sides see.
The real thing (another process's allocation exported as a descriptor and mapped here) is
marked gpu."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from stitchcuda_lab.verifier.arena import (ALIGN, Arena, ArenaError, Mapped, listen,
                                          receive_fd, size_for)
from stitchcuda_lab.verifier.exchange import Pinned, read_output


def _pair(nbytes: int) -> tuple[Mapped, Arena]:
    """The judge's and the sandbox's side over one host buffer (no driver)."""
    whole = torch.zeros(nbytes, dtype=torch.uint8)
    judge, box = Mapped.__new__(Mapped), Arena.__new__(Arena)
    judge.device, judge.nbytes, judge.whole = "cpu", nbytes, whole
    box.device, box.nbytes, box.whole = "cpu", nbytes, whole
    return judge, box


def _tensors():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(33, 7, generator=g),
            torch.randint(-9, 9, (5,), generator=g),
            torch.randn(6, 4, generator=g).t(),            # not contiguous
            torch.tensor(True),                             # a scalar
            torch.empty(0, 3),
            torch.randn(3, generator=g, dtype=torch.float64)]


def test_what_the_sandbox_puts_the_judge_takes_back_exactly():
    outs, ins = _tensors()[:3], _tensors()[3:]
    judge, box = _pair(size_for([t.numel() * t.element_size() for t in outs + ins]))
    placed = box.put([outs, ins])
    assert all(e["at"] % ALIGN == 0 for group in placed for e in group)
    taken = [judge.take(group) for group in placed]
    for got, want in zip(taken[0] + taken[1], outs + ins):
        assert isinstance(got, Pinned) and not got.error
        t = read_output(got, want)
        assert not isinstance(t, str), t
        assert t.shape == want.shape and t.dtype == want.dtype and torch.equal(t, want)


@pytest.mark.parametrize("make", [
    lambda g: torch.randn(2, 3, 4, 5, generator=g).to(memory_format=torch.channels_last),
    lambda g: torch.randn(2, 3, 1, 4, 5, generator=g).to(memory_format=torch.channels_last_3d),
    lambda g: torch.randn(1, 6, 1, 1, generator=g).to(memory_format=torch.channels_last),
    lambda g: torch.randn(4, 1, 6, generator=g).permute(2, 1, 0),
])
def test_a_dense_tensor_goes_into_the_arena_as_it_lies_and_comes_back_in_its_shape(make):
    """A channels-last output is copied as the one block it is (no permute into a temporary
    on the candidate's clock: 5 ms a call for a 2 GB output on the H200); the judge puts the
    elements back in order."""
    t = make(torch.Generator().manual_seed(1))
    judge, box = _pair(size_for([t.numel() * t.element_size()]))
    (entries,) = box.put([[t]])
    span = box.whole[:t.numel() * t.element_size()].view(t.dtype)
    storage = torch.as_strided(t, (t.numel(),), (1,))   # the elements as they lie in memory
    assert torch.equal(span, storage)
    (got,) = judge.take(entries)
    back = read_output(got, t)
    assert not isinstance(back, str), back
    assert back.shape == t.shape and torch.equal(back, t)


@pytest.mark.parametrize("entry", [
    {"at": 0, "nbytes": 16, "shape": [4, 4], "dtype": "quint8", "order": [1, 0]},
    {"at": 0, "nbytes": 0, "shape": [0, 1 << 47, 1 << 47], "dtype": "float32",
     "order": [2, 1, 0]},
])
def test_a_forged_order_is_bytes_moved_never_a_crash_of_the_judge(entry):
    """Whatever dtype or shape an entry names, the judge moves bytes; a forged entry gets the
    candidate a wrong output, not the judge an exception."""
    judge, _ = _pair(4096)
    (got,) = judge.take([entry])
    assert not got.error and got.read().numel() == entry["nbytes"]


def test_a_lazy_conjugate_is_copied_resolved():
    z = torch.randn(3, 4, dtype=torch.complex64).t().conj()   # dense, not contiguous, lazy
    judge, box = _pair(4096)
    (entries,) = box.put([[z]])
    assert torch.equal(read_output(judge.take(entries)[0], z), z.resolve_conj())


def test_a_tensor_with_gaps_or_repeats_is_copied_in_its_logical_order():
    g = torch.Generator().manual_seed(2)
    for t in (torch.randn(8, 8, generator=g)[:, ::2], torch.randn(3, 1, generator=g).expand(3, 4)):
        judge, box = _pair(4096)
        (entries,) = box.put([[t]])
        assert "order" not in entries[0]
        assert torch.equal(read_output(judge.take(entries)[0], t), t)


def test_the_judges_copy_does_not_move_when_the_arena_is_written_later():
    judge, box = _pair(4096)
    x = torch.arange(16, dtype=torch.float32)
    (entries,) = box.put([[x]])
    (got,) = judge.take(entries)
    box.whole.fill_(0xFF)          # the candidate rewrites the arena after the call answered
    assert torch.equal(read_output(got, x), x)


def test_a_second_put_after_the_first_leaves_the_first_in_place():
    """A checked call's first outputs, then its second call's after them (sandbox.send)."""
    judge, box = _pair(4096)
    first, second = torch.arange(10, dtype=torch.float32), -torch.arange(7, dtype=torch.float32)
    (a,) = box.put([[first]])
    (b,) = box.put([[second]], after=True)
    assert b[0]["at"] >= a[0]["at"] + a[0]["nbytes"] and b[0]["at"] % ALIGN == 0
    got = judge.take(a + b)
    assert torch.equal(read_output(got[0], first), first)
    assert torch.equal(read_output(got[1], second), second)
    (c,) = box.put([[second]])          # a put not ``after`` starts over
    assert c[0]["at"] == 0


def test_a_view_taken_in_place_reads_the_arena_as_it_is_now():
    """``copy=False`` (a checked call's second outputs, compared at once) reads the arena
    itself: what the sandbox writes later shows there, unlike in a copy."""
    judge, box = _pair(4096)
    x = torch.arange(16, dtype=torch.float32)
    (entries,) = box.put([[x]])
    (view,) = judge.take(entries, copy=False)
    (kept,) = judge.take(entries)
    box.whole[:4].fill_(0xFF)           # the first element's bytes: a NaN
    assert torch.isnan(read_output(view, x)[0]) and torch.equal(read_output(kept, x), x)


def test_a_tensor_past_the_arena_is_an_entry_that_says_so():
    judge, box = _pair(1024)
    (entries,) = box.put([[torch.zeros(1024, dtype=torch.float32)]])
    assert "error" in entries[0]
    (got,) = judge.take(entries)
    assert read_output(got, torch.zeros(1024)).startswith("output_count:")


@pytest.mark.parametrize("entry, why", [
    ({"at": 4096, "nbytes": 64, "shape": [16], "dtype": "float32"}, "outside the arena"),
    ({"at": 0, "nbytes": 8192, "shape": [2048], "dtype": "float32"}, "outside the arena"),
    ({"at": -256, "nbytes": 64, "shape": [16], "dtype": "float32"}, "outside the arena"),
    ({"at": 4, "nbytes": 64, "shape": [16], "dtype": "float32"}, "outside the arena"),
    ({"at": 0, "nbytes": 64, "shape": [17], "dtype": "float32"}, "size is not its shape"),
    ({"at": 0, "nbytes": 64, "shape": [16], "dtype": "Tensor"}, "size is not its shape"),
    ({"at": 0, "nbytes": 64, "shape": [-16], "dtype": "float32"}, "without its place"),
    ({"at": "0", "nbytes": 64, "shape": [16], "dtype": "float32"}, "without its place"),
    ("0:64", "not one"),
    ({"at": 0, "nbytes": 64, "shape": [4, 4], "dtype": "float32", "order": [1, 1]},
     "not a permutation"),
    ({"at": 0, "nbytes": 64, "shape": [4, 4], "dtype": "float32", "order": [1]},
     "not a permutation"),
    ({"at": 0, "nbytes": 64, "shape": [4, 4], "dtype": "float32", "order": "10"},
     "not a permutation"),
    ({"at": 0, "nbytes": 64, "shape": [4, 4], "dtype": "float32", "order": [1.0, 0]},
     "not a permutation"),
    ({"at": 0, "nbytes": 64, "shape": [4, 4], "dtype": "float32", "order": [0, "a"]},
     "not a permutation"),
    ({"at": 0, "nbytes": 64, "shape": [4, 4], "dtype": "float32", "order": [None, 1]},
     "not a permutation"),
])
def test_a_malformed_entry_is_a_protocol_error_not_a_read(entry, why):
    judge, _ = _pair(4096)
    (got,) = judge.take([entry])
    assert got.error.startswith("protocol:") and why in got.error


def test_entries_larger_together_than_the_arena_are_refused():
    """Each within the arena, all of them the whole of it: the judge would copy the arena out
    over and over, beyond its memory."""
    judge, _ = _pair(4096)
    got = judge.take([{"at": 0, "nbytes": 4096, "shape": [1024], "dtype": "float32"}] * 3)
    assert not got[0].error and all(g.error.startswith("protocol:") for g in got[1:])


def test_a_reply_with_too_many_entries_is_refused():
    judge, _ = _pair(4096)
    got = judge.take([{"at": 0, "nbytes": 4, "shape": [1], "dtype": "float32"}] * 10_000)
    assert len(got) == 1 and got[0].error.startswith("protocol:")


def test_the_arena_is_sized_for_each_tensor_on_its_boundary():
    assert size_for([1, 256, 257, 0]) == 256 + 256 + 512 + 256


SENDER = r"""
import sys, tempfile
from stitchcuda_lab.verifier.arena import send_fd
f = tempfile.TemporaryFile()
f.write(sys.argv[2].encode())
f.flush()
send_fd(sys.argv[1], f.fileno())
"""


def _send(name: str, text: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SENDER, name, text])


def test_a_descriptor_crosses_to_the_judge_from_the_sandboxs_process_only(tmp_path):
    """A process other than the sandbox that connects first (one that could reach the
    socket) is turned away by its pid."""
    name = str(tmp_path / "arena.sock")
    sock = listen(name)
    try:
        other = _send(name, "another candidate's")
        assert other.wait(timeout=60) == 0
        sandbox = _send(name, "the sandbox's")
        fd = receive_fd(sock, sandbox.pid, timeout=60)
        assert sandbox.wait(timeout=60) == 0
        try:   # the sender's own open file, at its offset: read from the start
            assert os.pread(fd, 64, 0) == b"the sandbox's"
        finally:
            os.close(fd)
    finally:
        sock.close()


def test_the_socket_is_its_sandboxs_users_alone(tmp_path):
    import stat
    path = tmp_path / "arena.sock"
    sock = listen(str(path))
    try:
        assert stat.S_ISSOCK(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        sock.close()


def test_no_descriptor_in_time_is_an_arena_error(tmp_path):
    sock = listen(str(tmp_path / "arena.sock"))
    try:
        with pytest.raises(ArenaError, match="did not send"):
            receive_fd(sock, 1, timeout=0.2)
    finally:
        sock.close()


EXPORTER = r"""
import json, sys, torch
from stitchcuda_lab.verifier.arena import Arena, send_fd
a = Arena(int(sys.argv[2]), "cuda")
send_fd(sys.argv[1], a.fd)
x = torch.arange(1000, dtype=torch.float32, device="cuda") * 0.5
(entries,) = a.put([[x]])
torch.cuda.synchronize()
print(json.dumps({"nbytes": a.nbytes, "entries": entries}), flush=True)
sys.stdin.readline()            # the judge has taken its copy
a.whole.fill_(7)
torch.cuda.synchronize()
print("rewritten", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def exporter(tmp_path):
    """A process that makes an arena and sends it; (process, its message, the judge's fd)."""
    name = str(tmp_path / "arena.sock")
    sock = listen(name)
    proc = subprocess.Popen([sys.executable, "-c", EXPORTER, name, str(1 << 20)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        fd = receive_fd(sock, proc.pid, timeout=120)
        line = proc.stdout.readline()
        assert line, "the exporting process said nothing"
        yield proc, json.loads(line), fd
    finally:
        sock.close()
        proc.kill()
        proc.wait()


@pytest.mark.gpu
def test_the_judge_maps_another_processs_arena(exporter):
    proc, sent, fd = exporter
    arena = Mapped(fd, sent["nbytes"], "cuda")
    print("the judge's mapping:", {1: "read-only", 3: "read-write"}[arena.memory.access])
    assert sent["nbytes"] >= 1 << 20 and sent["nbytes"] % (2 << 20) == 0   # whole granules
    (got,) = arena.take(sent["entries"])
    want = torch.arange(1000, dtype=torch.float32, device="cuda") * 0.5
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "rewritten"
    assert torch.equal(read_output(got, want), want)          # the copy taken before
    (again,) = arena.take(sent["entries"])
    sevens = torch.full((4000,), 7, dtype=torch.uint8, device="cuda").view(torch.float32)
    assert torch.equal(read_output(again, want), sevens)      # the mapping sees the rewrite
    arena.close()


@pytest.mark.gpu
def test_the_judge_cannot_map_more_than_the_sandbox_allocated(exporter):
    _, sent, fd = exporter
    with pytest.raises(ArenaError):
        Mapped(fd, sent["nbytes"] * 4, "cuda")


@pytest.mark.gpu
def test_the_memory_outlives_the_sandbox_that_made_it(exporter):
    """The judge's import is a reference of its own: a sandbox that is gone (or freed its
    side) leaves the judge's reads defined."""
    proc, sent, fd = exporter
    arena = Mapped(fd, sent["nbytes"], "cuda")
    proc.kill()
    proc.wait()
    (got,) = arena.take(sent["entries"])
    want = torch.arange(1000, dtype=torch.float32, device="cuda") * 0.5
    assert torch.equal(read_output(got, want), want)
    arena.close()
