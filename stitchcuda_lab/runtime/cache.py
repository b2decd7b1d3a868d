"""kernels_cache/: content-addressed build artifacts.

An entry is ``<root>/<kk>/<key><suffix>`` plus ``<key>.json`` holding the artifact's sha256.
The key hashes everything that changes the bytes (source, language, flags, target arch, compiler
and torch versions). Entries are written to a temporary name and renamed, the metadata last, so
a reader never sees half an entry; concurrent builders of one key take a file lock and the
second one finds the first one's result; an entry whose bytes no longer match its hash is
rebuilt. ``enabled=False`` (Settings.cache, STITCH_CACHE=0) builds every time into a private
temporary folder.

Entries are authenticated: the metadata carries an HMAC-SHA256 of the key and the artifact's
hash under a secret kept in ``<root>/.key`` (mode 0600, made on first use). Only trusted
processes hold a KernelCache; candidate code runs under another user (verifier/pool.py) that
can neither read the secret nor write the folder, and gets its builds from the Verifier. A
planted entry, with or without a matching hash file, fails the HMAC and is never loaded: it is
rebuilt over.

The folder has a size bound (``max_bytes``; Settings.cache_max_mb, STITCH_CACHE_MAX_MB): after a
write that takes it past the bound, the least recently used entries (a hit touches the metadata)
go until it is back under, except the one just written and any used in the last
``EVICT_GRACE`` seconds, which a process may be about to load (a loaded library stays mapped
when its file goes). A process checks at most every ``EVICT_EVERY`` seconds. An entry is
removed under its build lock, taken without waiting: one that is being rebuilt stays. Files of
a build that died (no metadata) count as used when they were made.

>>> cache = KernelCache("/tmp/kc")                              # doctest: +SKIP
>>> path = cache.get_or_build(cache.key(source="..."), build=lambda: b"...", suffix=".so")
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import os
import tempfile
import time
from pathlib import Path
from collections.abc import Callable

from filelock import FileLock

from ..errors import StoreError

KEY_VERSION = 1
SECRET_FILE = ".key"
EVICT_GRACE = 60.0   # seconds since its last use before an entry may be evicted
# A process lists the folder (tens of ms for thousands of entries) at most this often after a
# write: the bound may be passed by what one process writes in that time
EVICT_EVERY = 30.0
_LAST_EVICT: dict[str, float] = {}   # folder -> when this process last listed it


class KernelCache:
    def __init__(self, root: str | os.PathLike, enabled: bool = True,
                 max_bytes: int | None = None):
        self.root = Path(root)
        self.enabled = enabled
        self.max_bytes = max_bytes   # None: no bound
        self.evicted = 0
        self.hits = 0
        self.misses = 0
        self.rejected = 0          # entries whose HMAC did not verify (planted or torn)
        self._secret: bytes | None = None

    def secret(self) -> bytes:
        """The folder's HMAC secret, made (0600, exclusively) the first time it is needed."""
        if self._secret is None:
            path = self.root / SECRET_FILE
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(secrets.token_bytes(32))
            except FileExistsError:
                pass
            except OSError as e:
                raise StoreError(f"cannot create the kernel cache folder {self.root}: {e}",
                                 hint="set STITCH_CACHE_DIR to a writable folder or "
                                 "STITCH_CACHE=0") from None
            data = path.read_bytes()
            if len(data) < 32:   # a torn or truncated secret: start again
                path.unlink(missing_ok=True)
                return self.secret()
            self._secret = data
        return self._secret

    def _mac(self, key: str, digest: str) -> str:
        return hmac.new(self.secret(), f"{key}:{digest}".encode(), hashlib.sha256).hexdigest()

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
            # its last use, for eviction, before its bytes are read: an evictor that looks
            # again after this sees it used; one that removed it first makes this a miss
            os.utime(meta)
        except OSError:
            pass
        try:
            info = json.loads(meta.read_text())
            data = art.read_bytes()
        except (OSError, ValueError):
            return None
        digest = hashlib.sha256(data).hexdigest()
        if digest != info.get("sha256"):
            return None
        if not hmac.compare_digest(str(info.get("mac", "")), self._mac(key, digest)):
            self.rejected += 1
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
            digest = hashlib.sha256(data).hexdigest()
            info = {**(meta or {}), "sha256": digest, "size": len(data),
                    "created": time.time(), "mac": self._mac(key, digest)}
            try:
                _atomic_write(art, data)
                _atomic_write(art.with_suffix(".json"), json.dumps(info, sort_keys=True).encode())
            except OSError as e:   # a full disk: no entry rather than half of one
                raise StoreError(f"cannot write the kernel cache entry {art}: "
                                 f"{e.strerror or e}",
                                 hint="free disk space, or set STITCH_CACHE_DIR to another "
                                 "folder, or STITCH_CACHE=0 to build without the cache"
                                 ) from None
        last = _LAST_EVICT.get(str(self.root))
        if last is None or time.monotonic() - last >= EVICT_EVERY:
            _LAST_EVICT[str(self.root)] = time.monotonic()
            self.evict(keep=art)
        return art

    def entries(self) -> list[tuple[float, int, Path, str]]:
        """(last use, bytes, subfolder, key) of every entry, oldest use first: one listing of
        each of the 256 subfolders, a stat of each file. An entry's last use is its metadata's
        time; files of a key with no metadata (a builder that died before writing it, a
        temporary file of a write cut short) count as used when the newest of them was made."""
        out = []
        for sub in self.root.glob("??"):
            size: dict[str, int] = {}
            made: dict[str, float] = {}
            used: dict[str, float] = {}
            try:
                files = list(os.scandir(sub))
            except OSError:
                continue
            for f in files:
                key, _, suffix = f.name.partition(".")
                if suffix == "lock":
                    continue
                try:
                    st = f.stat()
                except OSError:   # removed meanwhile
                    continue
                size[key] = size.get(key, 0) + st.st_size
                made[key] = max(made.get(key, 0.0), st.st_mtime)
                if suffix == "json":
                    used[key] = st.st_mtime
            out += [(used.get(k, made[k]), size[k], sub, k) for k in size]
        return sorted(out)

    def evict(self, keep: Path | None = None) -> int:
        """Bring the folder under ``max_bytes``, least recently used entries first; the bytes
        it removed."""
        if self.max_bytes is None:
            return 0
        entries = self.entries()
        total = sum(size for _, size, _, _ in entries)
        freed = 0
        kept = keep.name.partition(".")[0] if keep is not None else None   # its key
        for used, size, sub, key in entries:
            if total - freed <= self.max_bytes:
                break
            if key == kept or time.time() - used < EVICT_GRACE:
                continue
            try:
                with FileLock(str(sub / f"{key}.lock"), timeout=0):
                    meta = sub / f"{key}.json"
                    # looked at again under the lock: a reader may have used it since the
                    # listing (get() marks the use before it reads the bytes)
                    if meta.exists() and time.time() - meta.stat().st_mtime < EVICT_GRACE:
                        continue
                    # metadata first: a reader then sees a miss, never an entry without bytes
                    for f in sorted(sub.glob(key + ".*"), key=lambda f: f.suffix != ".json"):
                        if not f.name.endswith(".lock"):
                            f.unlink(missing_ok=True)
            except (TimeoutError, OSError):   # being built, or gone: leave it
                continue
            freed += size
            self.evicted += 1
        return freed


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
