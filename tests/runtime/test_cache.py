"""kernels_cache/: content-addressed, verified on load, safe under concurrent builders."""

from __future__ import annotations

import threading

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
