"""The offline compiler's leaf helpers."""

from __future__ import annotations

from stitchcuda_lab.agents.offline.helpers import ceildiv, contiguous_strides, node_ref, round_up


def test_contiguous_strides_are_row_major():
    assert contiguous_strides([2, 3, 4]) == [12, 4, 1]
    assert contiguous_strides([5]) == [1] and contiguous_strides([]) == []


def test_ceildiv_and_round_up():
    assert ceildiv(10, 4) == 3 and ceildiv(8, 4) == 2 and ceildiv(0, 4) == 0
    assert round_up(10, 4) == 12 and round_up(12, 4) == 12


def test_node_ref_reads_only_a_plain_node_argument():
    assert node_ref({"node": "x"}) == "x"
    assert node_ref({"dtype": "float32"}) is None and node_ref(3) is None
    assert node_ref({"node": "x", "other": 1}) is None
