"""benchmarks/compile_cache.py: the compile caches a bare GPU machine gets back, and what it
sends on. What an archive holds is untrusted: it came back from a machine where candidates ran."""
import io
import json
import lzma
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import compile_cache as cc  # noqa: E402


def _member(t: tarfile.TarFile, name: str, data: bytes = b"x", **kind) -> None:
    info = tarfile.TarInfo(name)
    for k, v in kind.items():
        setattr(info, k, v)
    info.size = len(data) if info.isfile() else 0
    t.addfile(info, io.BytesIO(data) if info.isfile() else None)


def _archive(folder: Path, name: str, members: list[tuple], parts: int = 1) -> list[Path]:
    """``name`` (``...txz`` or ``...tgz``) in ``parts`` pieces: (path, bytes[, tar kind])."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for m in members:
            _member(t, m[0], *m[1:2], **(m[2] if len(m) > 2 else {}))
    raw = buf.getvalue()
    if name.endswith(".txz"):
        packed = lzma.compress(raw)
    else:
        import gzip
        packed = gzip.compress(raw)
    step = -(-len(packed) // parts)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(parts):
        p = folder / f"{name}.a{chr(97 + i)}"
        p.write_bytes(packed[i * step:(i + 1) * step])
        out.append(p)
    return out


def test_what_a_run_added_goes_back_and_comes_back_whole(tmp_path):
    cache = tmp_path / "cache"
    (cache / "compile" / "triton" / "k").mkdir(parents=True)
    (cache / "compile" / "triton" / "k" / "kernel.cubin").write_bytes(b"\x7fELF" * 1000)
    (cache / "inductor" / "fx").mkdir(parents=True)
    (cache / "inductor" / "fx" / "graph.py").write_text("print(1)\n")
    (cache / "inductor" / "locks").mkdir()
    (cache / "inductor" / "locks" / "a.lock").write_text("")
    (cache / "kernels").mkdir()
    (cache / "kernels" / "entry.so").write_bytes(b"ours")   # the kernel cache: never sent
    (cache / ".key").write_bytes(b"k" * 32)
    sent = tmp_path / "sent"
    assert cc.main(["save", str(cache), str(sent), "--part", "1k"]) == 0
    parts = sorted(sent.iterdir())
    assert len(parts) >= 1 and all(p.stat().st_size <= 1024 for p in parts)

    bare = tmp_path / "bare"
    manifest = tmp_path / "restored.json"
    assert cc.main(["restore", str(sent), str(bare), "--manifest", str(manifest)]) == 0
    got = sorted(str(p.relative_to(bare)) for p in bare.rglob("*") if p.is_file())
    assert got == ["compile/triton/k/kernel.cubin", "inductor/fx/graph.py"]
    assert (bare / "compile/triton/k/kernel.cubin").read_bytes() == b"\x7fELF" * 1000
    assert not (bare / "compile").stat().st_mode & 0o022
    assert not (bare / "inductor/fx/graph.py").stat().st_mode & 0o022
    assert set(json.loads(manifest.read_text())) == set(got)

    # the next run sends what it added, none of what it was given
    again = tmp_path / "again"
    assert cc.main(["save", str(bare), str(again), "--manifest", str(manifest)]) == 0
    assert not again.exists()
    (bare / "inductor" / "fx" / "other.py").write_text("print(2)\n")
    assert cc.added(bare, manifest) == ["inductor/fx/other.py"]


def test_archives_restore_oldest_first_the_undated_one_before_any_dated(tmp_path):
    src = tmp_path / "src"
    _archive(src, "compile-cache-20261206T150000.txz", [("compile/f", b"newest")])
    _archive(src, "compile-cache.tgz", [("compile/f", b"oldest"), ("compile/g", b"g")])
    _archive(src, "compile-cache-20261206T140000.txz", [("compile/f", b"middle")])
    assert [n for n, _ in cc.archives(src)] == [
        "compile-cache.tgz", "compile-cache-20261206T140000.txz",
        "compile-cache-20261206T150000.txz"]
    cache = tmp_path / "cache"
    cc.restore(src, cache, tmp_path / "m.json")
    assert (cache / "compile/f").read_bytes() == b"newest"
    assert (cache / "compile/g").read_bytes() == b"g"


def test_an_archive_that_does_not_read_whole_is_skipped_not_half_restored(tmp_path, capsys):
    src = tmp_path / "src"
    big = bytes(range(256)) * 4000
    parts = _archive(src, "compile-cache-20261206T140000.txz",
                     [("compile/a", big), ("compile/b", big[::-1])], parts=3)
    parts[1].unlink()   # a part that did not come back
    cut = _archive(src, "compile-cache-20261206T143000.tgz", [("compile/d", big)], parts=2)
    cut[1].write_bytes(cut[1].read_bytes()[:100])   # one that came back cut short
    _archive(src, "compile-cache-20261206T150000.txz", [("compile/c", b"whole")])
    (src / "compile-cache-20261206T150000.txz.aa.bak").write_bytes(b"junk")   # not a part
    cache = tmp_path / "cache"
    cc.restore(src, cache, tmp_path / "m.json")
    said = capsys.readouterr().out
    assert "compile-cache-20261206T140000.txz skipped" in said
    assert "compile-cache-20261206T143000.tgz skipped" in said
    assert sorted(p.name for p in (cache / "compile").iterdir()) == ["c"]
    assert (cache / "compile/c").read_bytes() == b"whole"


def test_nothing_in_an_archive_reaches_outside_the_compile_folders(tmp_path):
    """Links, a link in one archive that another writes through, '..', absolute paths, the
    kernel cache's secret, devices: none is written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    src = tmp_path / "src"
    _archive(src, "compile-cache-20261206T140000.txz", [
        ("compile/evil", b"", {"type": tarfile.SYMTYPE, "linkname": str(outside)}),
        ("compile/up", b"", {"type": tarfile.SYMTYPE, "linkname": "../.."}),
        ("compile/hard", b"", {"type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}),
        ("compile/dev", b"", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}),
        (".key", b"k" * 32), ("kernels/entry.so", b"planted"), ("ab/evil.so", b"x"),
        ("compile/../../escape", b"x"), ("/abs/compile/x", b"x"), ("compile/ok", b"ok")])
    _archive(src, "compile-cache-20261206T150000.txz", [
        ("compile/evil/pwn", b"through the link"), ("compile/up/pwn", b"up")])
    cache = tmp_path / "cache"
    cc.restore(src, cache, tmp_path / "m.json")
    assert not list(outside.iterdir())
    assert not (tmp_path / "escape").exists() and not (tmp_path / "pwn").exists()
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == [
        "compile", "compile/evil", "compile/evil/pwn", "compile/ok", "compile/up",
        "compile/up/pwn"]
    assert not any(p.is_symlink() for p in cache.rglob("*"))
    assert (cache / "compile/evil/pwn").read_bytes() == b"through the link"   # a plain folder


def test_a_link_already_in_the_cache_is_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    (cache / "compile").mkdir(parents=True)
    (cache / "compile" / "evil").symlink_to(outside)
    src = tmp_path / "src"
    _archive(src, "compile-cache-20261206T150000.txz", [("compile/evil/pwn", b"x")])
    cc.restore(src, cache, tmp_path / "m.json")
    assert not list(outside.iterdir())


@pytest.mark.parametrize("text,size", [("15m", 15 << 20), ("1k", 1024), ("300", 300)])
def test_part_sizes_read_as_split_writes_them(text, size):
    assert cc._size(text) == size


def test_a_cache_folder_reached_through_a_link_of_the_users_own_is_restored(tmp_path):
    """Only links under the cache folder are refused, not one on the way to it (/tmp as a
    link to /private/tmp)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")
    src = tmp_path / "src"
    _archive(src, "compile-cache-20261206T150000.txz", [("compile/f", b"f")])
    cc.restore(src, tmp_path / "via" / "cache", tmp_path / "m.json")
    assert (tmp_path / "real" / "cache" / "compile" / "f").read_bytes() == b"f"
