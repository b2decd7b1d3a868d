"""A disk that fills during a session or cache write: a clear StoreError, earlier data intact,
nothing half-written, and writing works again once there is space."""

from __future__ import annotations

import warnings

import pytest

from stitchcuda_lab.errors import StoreError
from stitchcuda_lab.store import SessionStore, StoreWarning
from stitchcuda_lab.runtime.cache import KernelCache

from .conftest import fill


def _records(log):
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)   # no torn or corrupt line either
        return log.records()


def test_session_artifact_write_on_a_full_disk_is_a_store_error_and_keeps_earlier_events(
        tiny_disk):
    log = SessionStore(tiny_disk / "s", secrets=[]).create({"problem": "p"}, session_id="s1")
    for i in range(3):
        log.append("progress", {"i": i, "blob": {"data": f"{i}" * 1000}})
    filler = fill(tiny_disk, leave=2048)
    with pytest.raises(StoreError, match="No space left on device") as ei:
        for i in range(3, 100):
            log.append("progress", {"i": i, "blob": {"data": f"{i}" * 8000}})
    assert ei.value.hint and "space" in ei.value.hint
    recs = _records(log)
    n = len(recs)
    assert [r.payload["i"] for r in recs] == list(range(n)) and n >= 3
    assert not [p for p in (tiny_disk / "s" / "s1" / "artifacts").iterdir()
                if p.name.startswith(".tmp")]
    filler.unlink()                                   # space again: the log carries on
    log.append("progress", {"i": n})
    reopened = SessionStore(tiny_disk / "s", secrets=[]).open("s1")
    assert [r.payload["i"] for r in _records(reopened)] == list(range(n + 1))


def test_an_event_line_cut_by_a_full_disk_is_undone_so_the_next_event_survives(tiny_disk):
    log = SessionStore(tiny_disk / "s", secrets=[]).create({"problem": "p"}, session_id="s1")
    log.append("progress", {"i": 0})
    events = tiny_disk / "s" / "s1" / "events.jsonl"
    while events.stat().st_size % 4096 < 3950:       # end the file just short of a page
        log.append("note", {"text": "p" * min(150, 3950 - events.stat().st_size % 4096)})
    filler = fill(tiny_disk, leave=0)
    with pytest.raises(StoreError, match="No space left on device"):
        log.append("note", {"text": "y" * 190})       # needs a new page: cut short
    filler.unlink()
    log.append("progress", {"i": 1})                  # same process, same SessionLog
    recs = _records(log)
    assert [r.payload["i"] for r in recs if r.kind == "progress"] == [0, 1]
    assert recs[-1].seq == recs[-2].seq + 1


def test_session_create_on_a_full_disk_is_a_store_error(tiny_disk):
    fill(tiny_disk, leave=0)
    with pytest.raises(StoreError):
        SessionStore(tiny_disk / "s", secrets=[]).create({"problem": "p" * 5000})


def test_cache_write_on_a_full_disk_is_a_store_error_and_leaves_no_entry(tiny_disk):
    cache = KernelCache(tiny_disk / "kc")
    old = cache.get_or_build("aa" * 32, lambda: b"old artifact", ".so")
    filler = fill(tiny_disk, leave=4096)
    with pytest.raises(StoreError, match="No space left on device") as ei:
        cache.get_or_build("bb" * 32, lambda: b"x" * 100_000, ".so")
    assert "STITCH_CACHE" in (ei.value.hint or "")
    assert cache.get("bb" * 32, ".so") is None                  # nothing half-committed
    assert not list((tiny_disk / "kc").rglob("*.tmp"))
    assert cache.get("aa" * 32, ".so") == old and old.read_bytes() == b"old artifact"
    filler.unlink()
    assert cache.get_or_build("bb" * 32, lambda: b"x" * 1000, ".so").read_bytes() == b"x" * 1000
