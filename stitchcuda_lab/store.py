"""Session folders: an append-only event log plus content-addressed artifacts.

    <root>/<id>/events.jsonl     one JSON record a line: {"seq", "time", "kind", "payload"};
                                 appended with flush + fsync, never rewritten
    <root>/<id>/artifacts/<sha>  blobs the records point at ({"$ref": sha}): sources, plans,
                                 candidates, verdicts, traces; written to a temp name, then renamed
    <root>/<id>/meta.json        problem name, device, agent, created, status, pid
    <root>/<id>/lock             pid (and start time) of the process driving the session

A crash can only ever cut the last line short: reading skips a torn or corrupt line with a
warning and keeps everything before it, and reopening for writing sets the torn tail aside.
A write that fails (a full disk) is a StoreError naming the cause; a line it cut short is
truncated away at once, so the next event starts on a clean line.
A session whose last event is not terminal and whose lock holder is gone is "interrupted".
Values of environment variables that look like secrets (``settings.secret_values``: API keys,
tokens) are replaced before anything reaches disk.

>>> import tempfile
>>> log = SessionStore(tempfile.mkdtemp()).create({"problem": "p"})
>>> log.append("plan_proposed", {"plan": {"tasks": []}}).seq
1
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import secrets as _secrets
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SessionNotFound, StoreError
from .settings import secret_values
from .redact import redact_urls

TERMINAL_KINDS = {"finished": "done", "stop": "stopped", "failed": "failed"}
_INLINE_MAX = 200           # strings longer than this, and any dict/list, go to artifacts
_NO_SPACE_HINT = "free disk space (or point the sessions root elsewhere), then carry on: " \
                 "what was written before is intact"


class StoreWarning(UserWarning):
    """A session log had a torn or corrupt line that was skipped."""


@dataclass
class Record:
    """One line of events.jsonl, with artifact references resolved on request."""

    seq: int
    time: float
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": self.time, "kind": self.kind, "payload": self.payload}


class SessionStore:
    """The sessions root: creates, opens and lists session folders.

    ``secrets`` are strings never to be written (default: ``settings.secret_values()``, the
    values of credential-like environment variables).
    """

    def __init__(self, root: str | os.PathLike, secrets: list[str] | None = None):
        self.root = Path(root)
        self.secrets = secret_values() if secrets is None else list(secrets)

    def create(self, meta: dict[str, Any], session_id: str | None = None) -> SessionLog:
        sid = session_id or _new_id(meta.get("problem", "session"))
        d = self.root / sid
        try:
            d.mkdir(parents=True, exist_ok=False)
            (d / "artifacts").mkdir()
        except FileExistsError:
            raise StoreError(f"session folder {d} already exists") from None
        except OSError as e:
            raise StoreError(f"cannot create session folder {d}: {e}",
                             hint="check that the sessions root is writable") from None
        log = SessionLog(d, self.secrets)
        full = {"id": sid, "created": _now_iso(), "status": "running", **meta}
        log.write_meta(full)
        (d / "events.jsonl").touch()
        log.acquire()
        return log

    def path(self, id_or_path: str | os.PathLike) -> Path:
        """The folder for a session id, a unique id prefix or a path."""
        p = Path(id_or_path)
        if (p / "events.jsonl").exists() or (p / "meta.json").exists():
            return p
        d = self.root / str(id_or_path)
        if (d / "meta.json").exists():
            return d
        if self.root.is_dir() and str(id_or_path):
            hits = [c for c in self.root.iterdir() if c.name.startswith(str(id_or_path))
                    and (c / "meta.json").exists()]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise SessionNotFound(f"session id {str(id_or_path)!r} is ambiguous",
                                      hint="matches: " + ", ".join(sorted(h.name for h in hits)))
        raise SessionNotFound(f"no session {str(id_or_path)!r} under {self.root}",
                              hint="list them with `stitchcuda-lab sessions --out ROOT`")

    def open(self, id_or_path: str | os.PathLike) -> SessionLog:
        return SessionLog(self.path(id_or_path), self.secrets)

    def list(self) -> list[dict[str, Any]]:
        """Every session's meta plus its computed status, newest first."""
        if not self.root.is_dir():
            return []
        out = []
        for d in self.root.iterdir():
            if not (d / "meta.json").exists():
                continue
            try:
                out.append(SessionLog(d, self.secrets).info())
            except StoreError as e:
                out.append({"id": d.name, "status": "unreadable", "error": str(e),
                            "dir": str(d)})
        return sorted(out, key=lambda m: m.get("created", ""), reverse=True)


class SessionLog:
    """One session folder: append events, put/get artifacts, read them back."""

    def __init__(self, directory: str | os.PathLike, secrets: list[str] | None = None):
        self.dir = Path(directory)
        self.id = self.dir.name
        self.secrets = secret_values() if secrets is None else list(secrets)
        self.events_path = self.dir / "events.jsonl"
        self.artifacts = self.dir / "artifacts"
        if not self.dir.is_dir():
            raise SessionNotFound(f"no session folder {self.dir}")
        self._seq: int | None = None

    # --- artifacts
    def put(self, data: str | bytes) -> str:
        """Store a blob under its sha256 (idempotent, atomic) and return the hash."""
        raw = self._redact(data.encode() if isinstance(data, str) else bytes(data))
        sha = hashlib.sha256(raw).hexdigest()
        dest = self.artifacts / sha
        if dest.exists():
            return sha
        try:
            self.artifacts.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.artifacts, prefix=".tmp-")
        except OSError as e:
            raise _write_error(self.artifacts, e) from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except BaseException as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(e, OSError):
                raise _write_error(dest, e) from None
            raise
        return sha

    def get(self, sha: str) -> bytes:
        try:
            return (self.artifacts / sha).read_bytes()
        except OSError as e:
            raise StoreError(f"artifact {sha[:12]} of session {self.id} is missing: {e}") from None

    def get_json(self, sha: str) -> Any:
        return json.loads(self.get(sha))

    # --- events
    def append(self, kind: str, payload: dict[str, Any] | None = None) -> Record:
        """Write one event durably. Dicts, lists and long strings become artifacts."""
        if self._seq is None:
            self._seq = self._repair()
        stored = {k: self._externalise(v) for k, v in (payload or {}).items()}
        rec = Record(seq=self._seq + 1, time=time.time(), kind=kind, payload=stored)
        line = self._redact(json.dumps(rec.to_dict(), sort_keys=True)) + "\n"
        try:
            size = self.events_path.stat().st_size
        except OSError:
            size = None
        try:
            with open(self.events_path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            if size is not None:   # take back a line the failure cut short
                try:
                    os.truncate(self.events_path, size)
                except OSError:
                    pass
            raise _write_error(self.events_path, e, "cannot append to") from None
        self._seq = rec.seq
        return rec

    @property
    def last_seq(self) -> int:
        """The seq of the last readable event (0 when there is none)."""
        if self._seq is not None:
            return self._seq
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWarning)
            return max((r.seq for r in self._iter_records(resolve=False)), default=0)

    def records(self, resolve: bool = True) -> list[Record]:
        """Every readable record in order; a torn or corrupt line is skipped with a warning."""
        return list(self._iter_records(resolve))

    def _iter_records(self, resolve: bool) -> Iterator[Record]:
        try:
            text = self.events_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return
        except OSError as e:
            raise StoreError(f"cannot read {self.events_path}: {e}") from None
        lines = text.split("\n")
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                rec = Record(seq=int(d["seq"]), time=float(d["time"]), kind=str(d["kind"]),
                             payload=dict(d.get("payload") or {}))
            except (ValueError, KeyError, TypeError):
                torn = i == len(lines)   # no newline after it: the write was cut short
                warnings.warn(f"{self.events_path}: skipping {'torn' if torn else 'corrupt'} "
                              f"line {i}", StoreWarning, stacklevel=3)
                continue
            if resolve:
                rec.payload = {k: self._resolve(v) for k, v in rec.payload.items()}
            yield rec

    def _repair(self) -> int:
        """Before the first append: set a torn tail aside so new lines start clean."""
        try:
            data = self.events_path.read_bytes()
        except FileNotFoundError:
            data = b""
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            aside = self.dir / f"events.torn-{int(time.time())}-{os.getpid()}"
            aside.write_bytes(data[cut:])
            with open(self.events_path, "r+b") as f:
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())
        seqs = [r.seq for r in self._iter_records(resolve=False)]
        return max(seqs, default=0)

    def _externalise(self, v: Any) -> Any:
        if isinstance(v, (dict, list)) or (isinstance(v, str) and len(v) > _INLINE_MAX):
            return {"$ref": self.put(json.dumps(v, sort_keys=True))}
        return v

    def _resolve(self, v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"$ref"}:
            return self.get_json(v["$ref"])
        return v

    def _redact(self, data):
        """``data`` (str or bytes) with every secret, raw or JSON-escaped, and every credential
        inside a URL replaced."""
        is_str = isinstance(data, str)
        raw = data.encode() if is_str else data
        for secret in self.secrets:
            for form in {secret, json.dumps(secret)[1:-1]}:
                raw = raw.replace(form.encode(), b"[redacted]")
        raw = redact_urls(raw)
        return raw.decode() if is_str else raw

    # --- drafts: kernel text typed and not yet verified or discarded
    def drafts(self) -> dict[str, dict[str, str]]:
        """candidate id -> kernel name -> text ({} when none, or unreadable: warned)."""
        try:
            data = json.loads((self.dir / "drafts.json").read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            warnings.warn(f"cannot read the unsaved edits of session {self.id} "
                          f"({self.dir / 'drafts.json'}): {e}", StoreWarning, stacklevel=2)
            return {}
        return {str(c): {str(k): str(t) for k, t in d.items()}
                for c, d in data.items() if isinstance(d, dict)} if isinstance(data, dict) else {}

    def write_drafts(self, drafts: dict[str, dict[str, str]]) -> None:
        path = self.dir / "drafts.json"
        try:
            if drafts:
                _atomic_write(path, self._redact(json.dumps(drafts, indent=1, sort_keys=True)))
            else:
                path.unlink(missing_ok=True)
        except OSError as e:
            raise _write_error(path, e, "cannot keep the unsaved edits in") from None

    # --- meta, lock, status
    def meta(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / "meta.json").read_text())
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot read {self.dir / 'meta.json'}: {e}") from None

    def write_meta(self, meta: dict[str, Any]) -> None:
        try:
            _atomic_write(self.dir / "meta.json",
                          self._redact(json.dumps(meta, indent=2, sort_keys=True)))
        except OSError as e:
            raise _write_error(self.dir / "meta.json", e) from None

    def update_meta(self, **changes: Any) -> dict[str, Any]:
        m = self.meta()
        m.update(changes)
        self.write_meta(m)
        return m

    def acquire(self) -> None:
        """Mark this process as the session's driver; refuse if another live process is."""
        holder = self.holder()
        if holder is not None and holder != os.getpid():
            raise StoreError(f"session {self.id} is in use by process {holder}",
                             hint="wait for it to finish, or stop that process")
        _atomic_write(self.dir / "lock", json.dumps({"pid": os.getpid(),
                                                     "start": _proc_start(os.getpid())}))
        self.update_meta(pid=os.getpid())

    def release(self) -> None:
        if self.holder() == os.getpid():
            try:
                (self.dir / "lock").unlink()
            except FileNotFoundError:
                pass

    def holder(self) -> int | None:
        """The pid of the live process holding the lock, or None."""
        try:
            lock = json.loads((self.dir / "lock").read_text())
            pid = int(lock["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not _alive(pid):
            return None
        start = lock.get("start")
        if start is not None and _proc_start(pid) not in (None, start):
            return None   # the pid was reused by another process
        return pid

    def status(self, records: list[Record] | None = None) -> str:
        """done | stopped | failed | waiting | paused | running | interrupted | new.

        ``paused``: stopped cleanly by a spending cap or an error it could not get past
        (``meta.json`` says which); ``resume`` carries it on."""
        recs = self.records(resolve=False) if records is None else records
        loop = [r for r in recs if r.kind in _LOOP_KINDS]
        if loop and loop[-1].kind in TERMINAL_KINDS:
            return TERMINAL_KINDS[loop[-1].kind]
        meta = self.meta()
        last = recs[-1].seq if recs else 0
        if meta.get("status") in ("waiting", "paused") and meta.get("last_seq") == last:
            return meta["status"]
        if self.holder() is not None:
            return "running"
        return "interrupted" if recs else "new"

    def info(self) -> dict[str, Any]:
        """meta.json plus computed status, event count and the last event's kind."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWarning)
            recs = self.records(resolve=False)
        m = self.meta()
        m.update(status=self.status(recs), events=len(recs), dir=str(self.dir),
                 last_event=recs[-1].kind if recs else None)
        return m


_LOOP_KINDS = {"plan_proposed", "plan_edited", "plan_approved", "candidates_proposed",
               "candidate_edited", "candidate_approved", "verdict_ready", "attempt_failed",
               "next_iteration", "finished", "stop", "failed"}


def _write_error(path: Path, e: OSError, what: str = "cannot write") -> StoreError:
    import errno
    full = e.errno in (errno.ENOSPC, errno.EDQUOT)
    return StoreError(f"{what} {path}: {e.strerror or e}",
                      hint=_NO_SPACE_HINT if full else "check that the sessions root is writable")


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    # A zombie (killed, not yet reaped) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _proc_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _new_id(name: str) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in str(name))[:32] or "session"
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{stem}-{_secrets.token_hex(3)}"
