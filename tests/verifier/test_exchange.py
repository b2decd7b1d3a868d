"""What crosses from a candidate's sandbox to the judge: output bytes, read defensively."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from stitchcuda_lab.verifier import channel
from stitchcuda_lab.verifier.exchange import (WIDEN_FEW, WIDEN_FEW_LEAST, can_peek, draw, hand_over, map_inputs,
                                              peek_output, pin_output, read_output, reveal,
                                              take_over, widen, write_outputs)


class _Problem:
    @staticmethod
    def get_inputs():
        return [torch.randn(4, 5), torch.randint(0, 9, (3,)), 7]


def test_both_sides_draw_the_same_inputs_from_a_seed_and_other_inputs_from_another():
    a, b, c = (draw(_Problem, "cpu", s) for s in (123, 123, 124))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[2] == b[2] == 7
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16,
                                   torch.int64, torch.bool])
def test_outputs_round_trip_bitwise(tmp_path, dtype):
    t = (torch.randn(3, 4) * 5).to(dtype)
    (entry,) = write_outputs([t.t()], tmp_path, "x")          # non-contiguous on purpose
    back = read_output(entry, t.t())
    assert back.dtype == dtype and back.shape == t.t().shape and torch.equal(back, t.t())


def test_an_output_read_from_the_sandboxs_folder_is_removed_and_one_elsewhere_is_not(tmp_path):
    """A GB output (or a timed call's inputs) in memory-backed files stays in memory until
    removed: the judge removes each file of its sandbox's folder once read."""
    t = torch.randn(64, 64)
    (entry,) = write_outputs([t], tmp_path, "r1_0")
    assert torch.equal(read_output(entry, t, str(tmp_path)), t)
    assert not os.path.exists(entry["path"])
    assert read_output(entry, t, str(tmp_path)).startswith("protocol")   # read once
    (entry,) = write_outputs([t], tmp_path, "r1_1")
    assert read_output(entry, t, str(tmp_path / "elsewhere")).startswith("protocol")
    assert os.path.exists(entry["path"])      # a path outside the folder is never touched


def test_shape_and_dtype_are_checked_before_any_byte_is_read(tmp_path):
    (entry,) = write_outputs([torch.zeros(2, 3)], tmp_path, "x")
    assert read_output(entry, torch.zeros(3, 2)).startswith("shape_mismatch")
    assert read_output(entry, torch.zeros(2, 3, dtype=torch.float64)).startswith(
        "dtype_mismatch")


def test_a_link_a_short_file_or_an_odd_path_is_refused(tmp_path):
    like = torch.zeros(4)
    (entry,) = write_outputs([like], tmp_path, "x")
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 16)
    link = tmp_path / "link.bin"
    os.symlink(secret, link)
    assert read_output(dict(entry, path=str(link)), like).startswith("protocol")
    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 8)
    assert read_output(dict(entry, path=str(short)), like).startswith("protocol")
    assert read_output(dict(entry, path="/tmp/a b;rm.bin"), like).startswith("protocol")
    assert read_output({"shape": [4]}, like).startswith("protocol")
    fifo = tmp_path / "fifo.bin"
    os.mkfifo(fifo)
    assert read_output(dict(entry, path=str(fifo)), like).startswith("protocol")  # no hang


def test_frames_that_are_not_messages_are_protocol_errors():
    r, w = os.pipe()
    try:
        os.write(w, (channel.MAX_MESSAGE + 1).to_bytes(8, "little"))
        with pytest.raises(channel.ProtocolError):
            channel.recv(r, 5)
        os.write(w, (2).to_bytes(8, "little") + b"[]")
        with pytest.raises(channel.ProtocolError):
            channel.recv(r, 5)
        channel.send(w, {"ok": 1})
        assert channel.recv(r, 5) == {"ok": 1}
    finally:
        os.close(r)
        os.close(w)


def test_only_files_in_the_sandboxs_own_outputs_folder_are_read(tmp_path):
    ref = torch.arange(4.0)
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    [entry] = write_outputs([ref], other, "t0")
    assert read_output(entry, ref, str(own)).startswith("protocol: an output file outside")
    linked = tmp_path / "linked"
    linked.symlink_to(other)            # the folder itself swapped for a link
    entry = dict(entry, path=str(linked / "t0_0.bin"))
    assert read_output(entry, ref, str(linked)).startswith("protocol: cannot open")
    [entry] = write_outputs([ref], own, "t1")
    assert torch.equal(read_output(entry, ref, str(own)), ref)


def test_a_timed_calls_output_file_written_again_after_it_was_pinned_is_not_taken(tmp_path):
    """The judge pins a timed call's output file as the call answers and reads it only when a
    check picks the call: a file the sandbox writes (again) in between is refused, however
    right its new bytes are; one left alone reads back."""
    ref = torch.randn(1000, 300)     # 300 pages: more than are sampled
    [entry] = write_outputs([torch.empty_like(ref)], tmp_path, "c1")
    late = pin_output(entry, str(tmp_path))
    with open(entry["path"], "r+b") as f:    # the answer, written once the check asks for it
        f.write(ref.numpy().tobytes())
    assert read_output(late, ref).startswith("output_changed")
    late.close()
    [entry] = write_outputs([ref], tmp_path, "c2")
    kept = pin_output(entry, str(tmp_path))
    assert torch.equal(read_output(kept, ref), ref)
    kept.close()
    assert read_output(pin_output(dict(entry, path="/tmp/x.bin"), str(tmp_path)),
                       ref).startswith("protocol")


def test_a_timed_calls_inputs_are_written_aside_and_moved_where_the_sandbox_reads_them(tmp_path):
    """Written into the sandbox's folder directly, an input could be read (and its answer
    computed) while the judge was still writing it, before the call and its clock; they are
    written where the sandbox cannot look and moved in, whole, once the clock runs."""
    staging, inputs = tmp_path / "staging", tmp_path / "inputs"
    staging.mkdir()
    inputs.mkdir()
    x = torch.randn(64, 32)
    handed = hand_over([x, 3], staging, "k")
    assert [p.name for p in staging.iterdir()] == ["k_0.bin"] and not any(inputs.iterdir())
    moved = reveal(handed, inputs)
    assert not any(staging.iterdir()) and moved[0]["path"] == str(inputs / "k_0.bin")
    got = take_over(moved)
    assert torch.equal(got[0], x) and got[1] == 3


def test_a_timed_calls_inputs_are_mapped_copy_on_write_not_read(tmp_path):
    """The sandbox maps a timed call's input files: no pass over their bytes is left in the
    candidate's process (to be rewritten into compute hidden in the calibrated path), and a
    forward that writes its input changes its own copy, never the judge's file."""
    x = torch.randn(512, 300)
    [entry, plain] = hand_over([x, 3], tmp_path, "m")
    before = open(entry["path"], "rb").read()
    got, three = map_inputs([entry, plain])
    assert torch.equal(got, x) and three == 3 and got.data_ptr() % 4096 == 0
    got.add_(1.0)
    assert open(entry["path"], "rb").read() == before
    [empty] = map_inputs(hand_over([torch.empty(0, 3)], tmp_path, "e"))
    assert empty.shape == (0, 3)


CHILD = """
import sys, torch
t = torch.arange(300_000, dtype=torch.float32) * 0.5
sys.stdout.write(f"{t.data_ptr()}\\n"); sys.stdout.flush(); sys.stdin.read()
"""


@pytest.fixture
def child():
    """A process holding a known tensor, as a sandbox holds a timed call's output."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    addr = int(proc.stdout.readline())
    yield proc.pid, addr
    proc.stdin.close()
    proc.wait()


def test_the_judge_reads_a_timed_calls_output_out_of_the_sandboxs_memory(child):
    pid, addr = child
    want = torch.arange(300_000, dtype=torch.float32) * 0.5
    probe = {"addr": addr, "bytes": bytes(want[:16].view(torch.uint8).numpy()).hex()}
    if not can_peek(pid, probe):
        pytest.skip("this system does not let a process read another's memory")
    assert not can_peek(pid, dict(probe, bytes="00" * 64))
    entry = {"addr": addr, "shape": [300_000], "dtype": "float32"}
    got = peek_output(pid, entry, limit=1 << 30)
    assert torch.equal(read_output(got, want), want)
    # a shape that claims more than the judge allows, an address the process has not mapped,
    # and entries without what the read needs: protocol errors, not reads
    assert read_output(peek_output(pid, entry, limit=1000), want).startswith("protocol")
    assert read_output(peek_output(pid, dict(entry, addr=4096), limit=1 << 30),
                       want).startswith("protocol")
    for bad in (dict(entry, addr="0x10"), dict(entry, shape="300000"),
                dict(entry, dtype="float99"), None):
        assert read_output(peek_output(pid, bad, limit=1 << 30), want).startswith("protocol")


def test_a_widened_draw_scales_all_of_a_tensor_or_a_few_places_as_its_seed_says():
    """Both sides widen a draw alike from its seed; some seeds scale every element, others a
    few at random places (a guard sampling the input cannot tell those from a plain draw).
    Indices and plain values are never touched."""
    x, idx = torch.rand(64, 128), torch.randint(0, 9, (5,))
    kinds = set()
    for seed in range(40):
        a, i2, three = widen([x, idx, 3], "-2x", seed)
        assert torch.equal(i2, idx) and three == 3
        assert torch.equal(a, widen([x, idx, 3], "-2x", seed)[0])   # the same from the seed
        moved = (a != x).sum().item()
        assert torch.equal(a[a != x], x[a != x] * -2.0)
        if moved == x.numel():
            kinds.add("all")
        else:
            # 8-32 places (fewer let a program wrong on part of the range through by chance);
            # a place drawn twice counts once
            assert WIDEN_FEW_LEAST - 2 <= moved <= WIDEN_FEW
            kinds.add("few")
    assert kinds == {"all", "few"}
    assert widen([x], None, 5)[0] is x
    assert widen([torch.empty(0, 3)], "2x", 1)[0].shape == (0, 3)


def test_a_far_draw_of_a_large_input_holds_no_more_than_one_copy_of_it_at_once(monkeypatch):
    """The far way's factors are drawn and applied in pieces: drawn whole, their int32 pick
    became an int64 index of the input's shape (16 GiB asked for an 8 GiB input on the GPU,
    beside the candidate's process). Complex inputs scale both parts by one factor."""
    from torch.profiler import ProfilerActivity, profile

    from stitchcuda_lab.verifier import exchange
    from stitchcuda_lab.verifier.exchange import FAR, WIDEN, widen, widens_few
    monkeypatch.setattr(exchange, "WIDEN_CHUNK", 1 << 14)
    seed = next(s for s in range(100) if not widens_few(s))
    x = torch.randn(512, 1000)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        a = widen([x], FAR[0][0], seed)[0]
    assert max(ev.cpu_memory_usage for ev in p.events()) <= x.numel() * x.element_size()
    assert {round(float(r), 6) for r in (a / x).unique()} == {round(f, 6) for f in WIDEN[FAR[0][0]]}
    z = torch.randn(64, 300, dtype=torch.complex64)
    parts = torch.view_as_real(widen([z], FAR[0][1], seed)[0]) / torch.view_as_real(z)
    assert torch.allclose(parts[..., 0], parts[..., 1]) and (parts[..., 0] < 0).all()


def test_the_far_way_scales_each_element_by_one_of_its_factors_drawn_alike_on_both_sides():
    """Each element of a far draw is times 64, 16 or 1/16 (with the way's sign), each factor
    met, the same from the same seed: 64x takes randn past exp's overflow, which 16x does not
    (a softmax without its max subtraction: candidates/range_softmax_without_max.py)."""
    from stitchcuda_lab.verifier.exchange import FAR, WIDEN, widened_how, widens_few
    assert FAR[0] == ("64x|16x|x/16", "-64x|-16x|-x/16")
    x = torch.randn(64, 128).abs() + 0.5
    for how, sign in (("64x|16x|x/16", 1.0), ("-64x|-16x|-x/16", -1.0)):
        seed = next(s for s in range(100) if not widens_few(s))   # the whole tensor
        a = widen([x], how, seed)[0]
        assert torch.equal(a, widen([x], how, seed)[0])
        ratio = a / x
        got = {round(float(r), 6) for r in ratio.unique()}
        assert got == {round(f, 6) for f in WIDEN[how]} and sign * WIDEN[how][0] > 0
        assert (a.abs() > 88.7).any()   # past exp's overflow
        assert widened_how(how, seed) == (
            f"times {sign * 64:g}, {sign * 16:g} or {sign / 16:g}, element by element")


def test_an_output_in_a_mapping_of_a_file_is_named_and_one_in_its_own_memory_is_not(tmp_path):
    import mmap
    import os

    from stitchcuda_lab.verifier.exchange import in_file_mapping
    path = tmp_path / "input.bin"
    path.write_bytes(torch.arange(1024, dtype=torch.float32).numpy().tobytes())
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE)
    mapped = torch.frombuffer(m, dtype=torch.float32)
    own = mapped.clone()

    def entry(t, n=None):
        return {"addr": t.data_ptr(), "shape": [n or t.numel()], "dtype": "float32"}

    assert in_file_mapping(os.getpid(), [entry(own), entry(mapped)]) == str(path)
    assert in_file_mapping(os.getpid(), [entry(own)]) == ""
    assert in_file_mapping(os.getpid(), [None, {"addr": "x"}, entry(own, 0)]) == ""
    del mapped
    m.close()
