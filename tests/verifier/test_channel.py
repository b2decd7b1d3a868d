"""The judge's message pipe (verifier/channel.py)."""

from __future__ import annotations

import os
import time

from stitchcuda_lab.verifier import channel


def test_a_writer_gone_while_the_pipe_stays_open_ends_the_wait():
    """A sandbox that exits while a child it left holds the pipe's write end sends no end of
    file: ``alive`` says it is gone, and the reader stops waiting at once, not at its
    timeout."""
    r, w = os.pipe()   # w stays open here, as the left-behind child would hold it
    try:
        t0 = time.monotonic()
        assert channel.recv(r, timeout=20.0, alive=lambda: False) is None
        assert time.monotonic() - t0 < 2.0
    finally:
        os.close(r)
        os.close(w)


def test_what_the_writer_sent_before_it_went_is_still_read():
    r, w = os.pipe()
    try:
        channel.send(w, {"ms": 1.5})
        assert channel.recv(r, timeout=5.0, alive=lambda: False) == {"ms": 1.5}
        assert channel.recv(r, timeout=5.0, alive=lambda: False) is None
    finally:
        os.close(r)
        os.close(w)


def test_a_living_writer_is_waited_for_until_the_timeout():
    r, w = os.pipe()
    try:
        t0 = time.monotonic()
        assert channel.recv(r, timeout=1.2, alive=lambda: True) is None
        assert time.monotonic() - t0 >= 1.2
    finally:
        os.close(r)
        os.close(w)
