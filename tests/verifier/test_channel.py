"""The judge's message pipe (verifier/channel.py)."""

from __future__ import annotations

import os
import time

import pytest

from stitchcuda_lab.verifier import channel


@pytest.fixture
def pipe():
    """(read end, write end); the write end stays open, as a child left behind would hold it."""
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def test_a_writer_gone_while_the_pipe_stays_open_ends_the_wait(pipe):
    """A sandbox that exits while a child it left holds the pipe's write end sends no end of
    file: ``alive`` says it is gone, and the reader stops waiting at once, not at its
    timeout."""
    t0 = time.monotonic()
    assert channel.recv(pipe[0], timeout=20.0, alive=lambda: False) is None
    assert time.monotonic() - t0 < 2.0


def test_what_the_writer_sent_before_it_went_is_still_read(pipe):
    channel.send(pipe[1], {"ms": 1.5})
    assert channel.recv(pipe[0], timeout=5.0, alive=lambda: False) == {"ms": 1.5}
    assert channel.recv(pipe[0], timeout=5.0, alive=lambda: False) is None


def test_a_living_writer_is_waited_for_until_the_timeout(pipe):
    t0 = time.monotonic()
    assert channel.recv(pipe[0], timeout=1.2, alive=lambda: True) is None
    assert time.monotonic() - t0 >= 1.2
