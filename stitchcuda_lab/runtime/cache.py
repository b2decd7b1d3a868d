"""kernels_cache/: content-addressed build artifacts.

An entry is ``<root>/<kk>/<key><suffix>`` plus ``<key>.json`` holding the artifact's sha256.
The key hashes everything that changes the bytes (source, language, flags, target arch, compiler
and torch versions). Entries are written to a temporary name and renamed, the metadata last, so
a reader never sees half an entry; concurrent builders of one key take a file lock and the
second one finds the first one's result; an entry whose bytes no longer match its hash is
rebuilt. ``enabled=False`` (Settings.cache, STITCH_CACHE=0) builds every time into a private
temporary folder.

>>> cache = KernelCache("/tmp/kc")                              # doctest: +SKIP
>>> path = cache.get_or_build(cache.key(source="..."), build=lambda: b"...", suffix=".so")
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from filelock import FileLock

from ..errors import StoreError

KEY_VERSION = 1


class KernelCache:
    def __init__(self, root: str | os.PathLike, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(**parts: object) -> str:
        """sha256 over the sorted parts (all must be JSON-able)."""
        blob = json.dumps({"v": KEY_VERSION, **parts}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def path(self, key: str, suffix: str) -> Path:
        return self.root / key[:2] / f"{key}{suffix}"

    def get(self, key: str, suffix: str) -> Path | None:
        """The verified artifact for ``key``, or None (missing, torn or corrupted)."""
        if not self.enabled:
            return None
        art = self.path(key, suffix)
        meta = art.with_suffix(".json")
        try:
            info = json.loads(meta.read_text())
            data = art.read_bytes()
        except (OSError, ValueError):
            return None
        if hashlib.sha256(data).hexdigest() != info.get("sha256"):
            return None
        return art

    def get_or_build(self, key: str, build: Callable[[], bytes], suffix: str,
                     meta: dict | None = None) -> Path:
        """The artifact's path: from the cache when a valid entry exists, else built and stored."""
        if not self.enabled:
            tmp = Path(tempfile.mkdtemp(prefix="stitch_nocache_"))
            art = tmp / f"{key}{suffix}"
            art.write_bytes(build())
            self.misses += 1
            return art
        found = self.get(key, suffix)
        if found is not None:
            self.hits += 1
            return found
        art = self.path(key, suffix)
        try:
            art.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the kernel cache folder {art.parent}: {e}",
                             hint="set STITCH_CACHE_DIR to a writable folder or STITCH_CACHE=0"
                             ) from None
        with FileLock(str(art.with_suffix(".lock")), timeout=600):
            found = self.get(key, suffix)  # another builder may have finished meanwhile
            if found is not None:
                self.hits += 1
                return found
            data = build()
            self.misses += 1
            info = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                    "created": time.time(), **(meta or {})}
            try:
                _atomic_write(art, data)
                _atomic_write(art.with_suffix(".json"), json.dumps(info, sort_keys=True).encode())
            except OSError as e:   # a full disk: no entry rather than half of one
                raise StoreError(f"cannot write the kernel cache entry {art}: "
                                 f"{e.strerror or e}",
                                 hint="free disk space, or set STITCH_CACHE_DIR to another "
                                 "folder, or STITCH_CACHE=0 to build without the cache"
                                 ) from None
        return art


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
