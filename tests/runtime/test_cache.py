"""kernels_cache/: content-addressed, verified on load, safe under concurrent builders."""

from __future__ import annotations

import os
import threading
import time

import pytest

from stitchcuda_lab import runtime
from stitchcuda_lab.runtime import build
from stitchcuda_lab.runtime.cache import KernelCache

SRC = ("#include <stdint.h>\n"
       "void add1(float* x, int64_t n) { for (int64_t i = 0; i < n; ++i) x[i] += 1.0f; }\n")


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "kc"))
    monkeypatch.delenv("STITCH_CACHE", raising=False)
    runtime.clear_loaded()
    yield tmp_path / "kc"
    runtime.clear_loaded()


def _compiles() -> int:
    return build.COMPILES["c"]


def test_cache_hit_does_not_call_the_compiler(cache_env):
    n0 = _compiles()
    runtime.load(SRC, lang="c", name="add1")
    assert _compiles() == n0 + 1
    runtime.clear_loaded()  # forget the in-process module: only the disk cache can help now
    runtime.load(SRC, lang="c", name="add1")
    assert _compiles() == n0 + 1
    assert len(list(cache_env.rglob("*.so"))) == 1


def test_key_changes_with_source_and_flags(cache_env):
    n0 = _compiles()
    runtime.load(SRC, lang="c", name="add1")
    runtime.load(SRC.replace("1.0f", "2.0f"), lang="c", name="add1")
    runtime.load(SRC, lang="c", name="add1", flags=("-DX=1",))
    assert _compiles() == n0 + 3
    assert len(list(cache_env.rglob("*.so"))) == 3


def test_corrupted_entry_is_detected_and_rebuilt(cache_env):
    import torch
    runtime.load(SRC, lang="c", name="add1")
    (so,) = cache_env.rglob("*.so")
    so.unlink()  # (this process maps the old file; a new inode leaves that mapping intact)
    so.write_bytes(b"\x7fELF garbage")
    runtime.clear_loaded()
    n0 = _compiles()
    mod = runtime.load(SRC, lang="c", name="add1")
    assert _compiles() == n0 + 1
    x = torch.zeros(4)
    mod.call("add1", x, 4)
    assert x.tolist() == [1.0] * 4


def test_kill_switch_builds_every_time_and_writes_nothing(cache_env, monkeypatch):
    monkeypatch.setenv("STITCH_CACHE", "0")
    n0 = _compiles()
    runtime.load(SRC, lang="c", name="add1")
    runtime.clear_loaded()
    runtime.load(SRC, lang="c", name="add1")
    assert _compiles() == n0 + 2
    assert not cache_env.exists() or not list(cache_env.rglob("*.so"))


def test_concurrent_builders_of_one_key_build_once(tmp_path):
    cache = KernelCache(tmp_path)
    calls = []
    barrier = threading.Barrier(4)

    def slow_build() -> bytes:
        calls.append(1)
        return b"artifact"

    def worker(out: list) -> None:
        barrier.wait()
        out.append(cache.get_or_build("ab" * 32, slow_build, ".bin"))

    results: list = []
    threads = [threading.Thread(target=worker, args=(results,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert {p.read_bytes() for p in results} == {b"artifact"}
    assert not list(tmp_path.rglob("*.tmp"))  # no torn temporary files left behind


def test_entry_without_metadata_is_a_miss(tmp_path):
    cache = KernelCache(tmp_path)
    key = "cd" * 32
    p = cache.path(key, ".bin")
    p.parent.mkdir(parents=True)
    p.write_bytes(b"half-written")  # no .json: a builder died before committing
    assert cache.get(key, ".bin") is None
    assert cache.get_or_build(key, lambda: b"good", ".bin").read_bytes() == b"good"


def test_key_is_stable_and_order_independent():
    assert KernelCache.key(a=1, b="x") == KernelCache.key(b="x", a=1)
    assert KernelCache.key(a=1) != KernelCache.key(a=2)


# -- the size bound: least recently used entries go, never one in use or being built --

@pytest.fixture
def every_write(monkeypatch):
    """Each write checks the bound (a process checks at most every EVICT_EVERY seconds)."""
    from stitchcuda_lab.runtime import cache
    monkeypatch.setattr(cache, "EVICT_EVERY", 0.0)

def _entry(cache: KernelCache, name: str, size: int, used_ago: float) -> str:
    key = cache.key(source=name)
    art = cache.get_or_build(key, build=lambda: b"x" * size, suffix=".so")
    t = time.time() - used_ago
    os.utime(art.with_suffix(".json"), (t, t))
    return key


def test_past_the_bound_the_least_recently_used_entries_go(tmp_path, every_write):
    cache = KernelCache(tmp_path / "kc", max_bytes=10_000)
    old = _entry(cache, "old", 4000, used_ago=3600)
    hit = _entry(cache, "hit", 4000, used_ago=1800)
    mid = _entry(cache, "mid", 1000, used_ago=600)
    assert cache.evicted == 0   # 9000 bytes of artifacts: under the bound
    assert cache.get(hit, ".so") is not None   # a hit is a use: now the newest
    new = _entry(cache, "new", 4000, used_ago=0)
    # 13000 past 10000: the oldest use goes first, and that alone brings it under
    assert cache.get(old, ".so") is None
    assert sorted(p.suffix for p in (tmp_path / "kc").glob(f"??/{old}.*")) == [".lock"]
    assert all(cache.get(k, ".so") is not None for k in (hit, mid, new))
    assert cache.evicted == 1
    # a bound smaller than the newest entry keeps the newest entry
    small = KernelCache(tmp_path / "kc", max_bytes=100)
    for k in (hit, mid, new):   # out of the grace period again
        t = time.time() - 3600
        os.utime(small.path(k, ".json"), (t, t))
    last = _entry(small, "last", 500, used_ago=0)
    assert [small.get(k, ".so") is not None for k in (hit, mid, new, last)] == \
        [False, False, False, True]


def test_an_entry_used_lately_or_being_built_is_never_evicted(tmp_path, every_write):
    from filelock import FileLock
    cache = KernelCache(tmp_path / "kc", max_bytes=1000)
    recent = _entry(cache, "recent", 800, used_ago=5)       # in its grace period
    building = _entry(cache, "building", 800, used_ago=3600)
    with FileLock(str(cache.path(building, ".lock"))):       # another builder holds it
        _entry(cache, "new", 800, used_ago=0)
    assert cache.get(recent, ".so") is not None and cache.get(building, ".so") is not None
    assert cache.evicted == 0
    # once the lock is free and the grace period past, both go on the next write
    t = time.time() - 3600
    for k in (recent, building):
        os.utime(cache.path(k, ".json"), (t, t))
    _entry(cache, "after", 100, used_ago=0)
    assert cache.get(recent, ".so") is None and cache.get(building, ".so") is None


def test_an_entry_used_after_the_listing_or_left_by_a_dead_build_is_judged_as_it_is_now(
        tmp_path, every_write):
    """The evictor looks at an entry's last use again under its lock: a reader that used it
    since the listing keeps it. Files with no metadata (a build that died) count by when
    they were made, and go once old."""
    cache = KernelCache(tmp_path / "kc", max_bytes=500)   # "used" alone is past it
    used = _entry(cache, "used", 800, used_ago=3600)
    stale = cache.entries()                       # lists "used" as an hour old
    assert cache.get(used, ".so") is not None      # ... then a reader uses it
    cache.entries = lambda: stale                  # an evictor working from that listing
    cache.evict()
    assert cache.path(used, ".so").exists() and cache.evicted == 0
    del cache.entries
    dead = cache.key(source="dead")
    orphan = cache.path(dead, ".so")
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"x" * 900)                 # no .json: its builder died
    tmp = orphan.with_name(orphan.name + ".abc.tmp")
    tmp.write_bytes(b"y" * 10)
    t = time.time() - 3600
    for f in (orphan, tmp):
        os.utime(f, (t, t))
    made, size = next((u, n) for u, n, _, k in cache.entries() if k == dead)
    assert abs(made - t) < 1 and size == 910
    cache.evict()
    assert not orphan.exists() and not tmp.exists() and cache.path(used, ".so").exists()


def test_a_process_lists_the_folder_at_most_every_evict_every_seconds(tmp_path, monkeypatch):
    from stitchcuda_lab.runtime import cache as cache_mod
    monkeypatch.setattr(cache_mod, "_LAST_EVICT", {})
    cache = KernelCache(tmp_path / "kc", max_bytes=1000)
    old = _entry(cache, "old", 800, used_ago=3600)
    _entry(cache, "new", 800, used_ago=0)       # listed right after the first write only
    assert cache.path(old, ".so").exists() and cache.evicted == 0   # (a get() is a use)
    monkeypatch.setitem(cache_mod._LAST_EVICT, str(cache.root),
                        time.monotonic() - cache_mod.EVICT_EVERY)
    _entry(cache, "later", 100, used_ago=0)     # EVICT_EVERY on: listed again
    assert not cache.path(old, ".so").exists() and cache.evicted == 1


def test_the_runtime_cache_takes_its_bound_from_settings(cache_env, monkeypatch):
    from stitchcuda_lab.errors import ConfigError
    from stitchcuda_lab.runtime.kernels import _cache
    from stitchcuda_lab.settings import Settings
    monkeypatch.setenv("STITCH_CACHE_MAX_MB", "3")
    assert _cache().max_bytes == 3 * 2 ** 20
    monkeypatch.setenv("STITCH_CACHE_MAX_MB", "0")
    assert _cache().max_bytes is None
    with pytest.raises(ConfigError, match="cache_max_mb"):
        Settings(cache_max_mb=-1)
