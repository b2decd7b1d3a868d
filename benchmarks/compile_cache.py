"""The judge's compile caches (Inductor's graphs and autotuning, Triton's kernels) carried
between GPU machines that start bare, for benchmarks/kernelbench.sh.

    python3 benchmarks/compile_cache.py restore FROM CACHE_DIR --manifest M
    python3 benchmarks/compile_cache.py save CACHE_DIR TO --manifest M [--part 15m]

``restore`` unpacks every archive in FROM (``compile-cache[-STAMP].txz`` or ``.tgz``, in parts
``.aa``, ``.ab``, ...), oldest first, and lists what it wrote in M; ``save`` packs what is in
CACHE_DIR's compile folders and not in M (what this run added) as one more archive in TO.
A transfer that limits each file's size and their total then carries one run's additions,
not the whole cache again each time.

Only regular files under the two compile folders (FOLDERS) come out of an archive, written
by whoever runs this and writable by no one else: no link, device or path outside them,
nothing of the kernel cache or its secret. An archive that does not read whole (a part
missing or cut short, a compressor this machine lacks) is skipped with a warning: a cache
file cut short would be loaded, not missed.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path, PurePosixPath

FOLDERS = ("compile", "inductor")
PART = re.compile(r"^(compile-cache(?:-(\d{8}T\d{6}))?\.(txz|tgz))\.([a-z]{2,})$")
# lock files are rewritten by any run that takes them: not what a run added
SKIP_PARTS = {"locks"}


def archives(folder: Path) -> list[tuple[str, list[Path]]]:
    """(name, its parts in order) of each archive in ``folder``, oldest first: the undated
    name of the first scheme before any dated one."""
    found: dict[str, tuple[str, list[Path]]] = {}
    for p in folder.iterdir() if folder.is_dir() else []:
        m = PART.match(p.name)
        if m and p.is_file():
            found.setdefault(m.group(1), (m.group(2) or "", []))[1].append(p)
    return [(name, sorted(parts)) for name, (_, parts) in
            sorted(found.items(), key=lambda kv: (kv[1][0], kv[0]))]


def _wanted(name: str) -> PurePosixPath | None:
    """The member's path where it may be written: under one of FOLDERS, no '..', not absolute."""
    p = PurePosixPath(name)
    if p.is_absolute() or not p.parts or p.parts[0] not in FOLDERS \
            or any(part in ("..", "") for part in p.parts) or SKIP_PARTS & set(p.parts):
        return None
    return p


def _inside(dest: Path, root: Path) -> bool:
    """Whether writing ``dest`` stays under ``root``: no folder on the way, nor ``dest``
    itself, is a link (none of ours makes one; one already there is not written through)."""
    p = dest
    while p != root and p != p.parent:
        if p.is_symlink():
            return False
        p = p.parent
    return p == root


def _open(name: str, parts: list[Path], scratch: Path) -> tarfile.TarFile:
    """The archive read whole into ``scratch`` (decompressed), or an error saying why not."""
    names = [p.name.rsplit(".", 1)[1] for p in parts]
    if names != [_suffix(i) for i in range(len(parts))]:
        raise EOFError(f"its parts are {', '.join(names)}: one is missing")
    raw = scratch / "archive"
    with open(raw, "wb") as out:
        dec = lzma.LZMADecompressor() if name.endswith(".txz") \
            else zlib.decompressobj(16 + zlib.MAX_WBITS)
        for p in parts:
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    out.write(dec.decompress(chunk))
        if not dec.eof:
            raise EOFError("the compressed stream ends early (a part missing or cut short)")
    t = tarfile.open(raw, "r:")
    t.getmembers()   # reads every header: a tar cut short fails here
    return t


def restore(src: Path, cache: Path, manifest: Path) -> int:
    wrote: dict[str, int] = {}
    found = archives(src)
    cache.mkdir(parents=True, exist_ok=True)
    if found:   # the folder the judge reads its compiled graphs from: its runner's alone
        os.chmod(cache, 0o700)
    root = cache.absolute()   # not resolved: a link above the cache folder is the user's own
    for name, parts in found:
        with tempfile.TemporaryDirectory() as scratch:
            try:
                t = _open(name, parts, Path(scratch))
            except (OSError, EOFError, tarfile.TarError, ValueError, lzma.LZMAError,
                    zlib.error) as e:
                print(f"compile caches: {name} skipped, it does not read whole ({e})")
                continue
            with t:
                for m in t.getmembers():
                    rel = _wanted(m.name)
                    if rel is None or not m.isfile():
                        continue
                    dest = root.joinpath(*rel.parts)
                    if not _inside(dest, root):
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    data = t.extractfile(m)
                    tmp = dest.with_name(f".{dest.name}.part")
                    with open(tmp, "wb") as out:
                        shutil.copyfileobj(data, out)
                    os.chmod(tmp, 0o644)
                    os.replace(tmp, dest)
                    wrote[str(rel)] = m.size
    for d in FOLDERS:
        for dirpath, _dirs, _ in os.walk(cache / d):
            os.chmod(dirpath, 0o755)
    manifest.write_text(json.dumps(wrote))
    print(f"compile caches restored: {len(wrote)} files from {len(found)} archive(s) in {src}")
    return 0


def added(cache: Path, manifest: Path | None) -> list[str]:
    """Regular files of the compile folders that restore did not write (or wrote at another
    size), as paths relative to ``cache``."""
    had = json.loads(manifest.read_text()) if manifest and manifest.exists() else {}
    out = []
    for d in FOLDERS:
        for dirpath, dirnames, files in os.walk(cache / d):
            dirnames[:] = [n for n in dirnames if n not in SKIP_PARTS]
            for f in files:
                p = Path(dirpath) / f
                rel = str(p.relative_to(cache))
                if p.is_symlink() or not p.is_file() or f.endswith(".part"):
                    continue
                if had.get(rel) != p.stat().st_size:
                    out.append(rel)
    return sorted(out)


def save(cache: Path, dest: Path, manifest: Path | None, part: int) -> int:
    new = added(cache, manifest)
    if not new:
        print("compile caches: nothing new to save")
        return 0
    xz = shutil.which("xz")
    name = f"compile-cache-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}." \
           + ("txz" if xz else "tgz")
    with tempfile.TemporaryDirectory() as scratch:
        packed = Path(scratch) / name
        if xz:   # all cores: level 2's caches were 47 MB in gzip, 19 MB in xz
            with open(packed, "wb") as out:
                proc = subprocess.Popen([xz, "-T0", "-6", "-c"], stdin=subprocess.PIPE,
                                        stdout=out)
                with tarfile.open(fileobj=proc.stdin, mode="w|") as t:
                    for rel in new:
                        t.add(cache / rel, arcname=rel, recursive=False)
                proc.stdin.close()
                if proc.wait() != 0:
                    print("compile caches not saved: xz failed")
                    return 1
        else:
            with tarfile.open(packed, "w:gz") as t:
                for rel in new:
                    t.add(cache / rel, arcname=rel, recursive=False)
        dest.mkdir(parents=True, exist_ok=True)
        size = packed.stat().st_size
        with open(packed, "rb") as f:
            for i in range(max(1, -(-size // part))):
                (dest / f"{name}.{_suffix(i)}").write_bytes(f.read(part))
    print(f"compile caches saved: what this run added, {len(new)} files, "
          f"{size / 2**20:.1f} MB in {name}.*")
    return 0


def _suffix(i: int) -> str:
    """The i-th part's suffix, as split(1) names them: aa, ab, ..., zz."""
    return chr(97 + i // 26) + chr(97 + i % 26)


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(text[:-1]) * units[text[-1].lower()] if text[-1].lower() in units else int(text)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("restore")
    r.add_argument("src", type=Path)
    r.add_argument("cache", type=Path)
    r.add_argument("--manifest", type=Path, required=True)
    s = sub.add_parser("save")
    s.add_argument("cache", type=Path)
    s.add_argument("dest", type=Path)
    s.add_argument("--manifest", type=Path)
    s.add_argument("--part", type=_size, default=15 << 20)
    a = ap.parse_args(argv)
    if a.verb == "restore":
        return restore(a.src, a.cache, a.manifest)
    return save(a.cache, a.dest, a.manifest, a.part)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
