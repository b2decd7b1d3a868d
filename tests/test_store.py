"""Session store: durable append-only events, content-addressed artifacts, crash tolerance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from stitchcuda_lab.errors import SessionNotFound, StoreError
from stitchcuda_lab.store import SessionLog, SessionStore, StoreWarning, secret_values


@pytest.fixture
def store(tmp_path):
    return SessionStore(tmp_path / "sessions", secrets=[])


def test_create_writes_meta_events_and_artifacts_folder(store):
    log = store.create({"problem": "mlp", "device": "cpu", "agent": "offline"})
    assert (log.dir / "events.jsonl").exists() and (log.dir / "artifacts").is_dir()
    meta = json.loads((log.dir / "meta.json").read_text())
    assert meta["problem"] == "mlp" and meta["pid"] == os.getpid() and meta["created"]
    assert log.dir.parent == store.root


def test_events_get_increasing_seq_and_big_payloads_become_artifacts(store):
    log = store.create({"problem": "p"})
    plan = {"tasks": [{"id": "t1", "ops": ["add"]}]}
    log.append("plan_proposed", {"plan": plan, "note": "short"})
    log.append("plan_approved", {})
    lines = (log.dir / "events.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert [json.loads(x)["seq"] for x in lines] == [1, 2]
    ref = first["payload"]["plan"]["$ref"]
    assert first["payload"]["note"] == "short"
    assert json.loads((log.dir / "artifacts" / ref).read_text()) == plan
    assert log.records()[0].payload["plan"] == plan


def test_artifacts_are_content_addressed_and_idempotent(store):
    log = store.create({"problem": "p"})
    a = log.put("__global__ void k() {}")
    assert a == log.put("__global__ void k() {}")
    import hashlib
    assert a == hashlib.sha256(b"__global__ void k() {}").hexdigest()
    assert log.get(a) == b"__global__ void k() {}"
    assert not [p for p in log.artifacts.iterdir() if p.name.startswith(".tmp-")]


def test_a_torn_last_line_is_skipped_with_a_warning_and_nothing_earlier_is_lost(store):
    log = store.create({"problem": "p"})
    for i in range(3):
        log.append("progress", {"i": i})
    with open(log.events_path, "a") as f:
        f.write('{"seq": 4, "time": 1.0, "kind": "pro')       # a write cut short
    with pytest.warns(StoreWarning, match="torn line 4"):
        recs = SessionLog(log.dir).records()
    assert [r.payload["i"] for r in recs] == [0, 1, 2]


def test_appending_after_a_torn_line_sets_it_aside_and_continues(store):
    log = store.create({"problem": "p"})
    log.append("progress", {"i": 0})
    with open(log.events_path, "a") as f:
        f.write('{"seq": 2, "ti')
    again = SessionLog(log.dir, secrets=[])
    assert again.append("progress", {"i": 1}).seq == 2
    recs = again.records()
    assert [r.payload["i"] for r in recs] == [0, 1]
    assert next(log.dir.glob("events.torn-*")).read_text() == '{"seq": 2, "ti'


def test_a_corrupt_middle_line_is_skipped_and_later_lines_kept(store):
    log = store.create({"problem": "p"})
    log.append("progress", {"i": 0})
    with open(log.events_path, "a") as f:
        f.write("garbage\n")
    log.append("progress", {"i": 1})
    with pytest.warns(StoreWarning, match="corrupt line 2"):
        assert [r.payload["i"] for r in log.records()] == [0, 1]


def test_status_follows_the_last_event_and_the_lock(store):
    log = store.create({"problem": "p"})
    log.append("plan_proposed", {"plan": {}})
    assert log.status() == "running"            # this live process holds it
    log.release()
    assert log.status() == "interrupted"
    log.update_meta(status="waiting", last_seq=1)
    assert log.status() == "waiting"
    log.append("finished", {"reason": "done"})
    assert log.status() == "done"


def test_a_lock_held_by_a_dead_process_does_not_count(store, tmp_path):
    log = store.create({"problem": "p"})
    log.append("plan_proposed", {"plan": {}})
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    (log.dir / "lock").write_text(json.dumps({"pid": proc.pid, "start": None}))
    assert log.holder() is None and log.status() == "interrupted"


def test_a_lock_held_by_another_live_process_refuses(store):
    log = store.create({"problem": "p"})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (log.dir / "lock").write_text(json.dumps({"pid": proc.pid, "start": None}))
        with pytest.raises(StoreError, match=f"in use by process {proc.pid}"):
            SessionLog(log.dir).acquire()
    finally:
        proc.kill()
        proc.wait()


def test_list_and_open_by_id_or_prefix(store):
    a = store.create({"problem": "alpha"})
    b = store.create({"problem": "beta"})
    b.append("finished", {})
    listed = {m["id"]: m for m in store.list()}
    assert set(listed) == {a.id, b.id}
    assert listed[b.id]["status"] == "done" and listed[a.id]["status"] == "running"
    assert store.open(a.id).id == a.id
    assert store.open(a.dir).id == a.id
    with pytest.raises(SessionNotFound, match="no session 'zzz'"):
        store.open("zzz")


def test_secrets_in_payloads_meta_and_artifacts_are_redacted(tmp_path):
    key = "sk-ant-api03-THIS-IS-SECRET-1234567890"
    st = SessionStore(tmp_path, secrets=secret_values({"ANTHROPIC_API_KEY": key, "HOME": "/x"}))
    log = st.create({"problem": "p", "note": f"key {key}"})
    log.append("llm_exchange", {"prompt": "x" * 300 + key, "reply": {"text": key}, "k": key})
    log.put(f"// {key}")
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert key not in p.read_text(errors="replace"), p


def test_secret_values_take_credential_like_names_only():
    env = {"ANTHROPIC_API_KEY": "sk-ant-12345678", "GITHUB_TOKEN": "ghp_abcdefgh",
           "PATH": "/usr/bin:/bin", "SHORT_TOKEN": "abc"}
    assert set(secret_values(env)) == {"sk-ant-12345678", "ghp_abcdefgh"}


WRITER = textwrap.dedent("""\
    import sys
    from stitchcuda_lab.store import SessionStore
    log = SessionStore(sys.argv[1], secrets=[]).create({"problem": "crash"}, session_id="s1")
    print("ready", flush=True)
    i = 0
    while True:
        log.append("progress", {"i": i, "blob": {"data": "x" * (i % 700)}})
        i += 1
    """)


def test_sigkill_mid_write_keeps_earlier_events_and_the_session_resumes(tmp_path):
    root = tmp_path / "sessions"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    events = root / "s1" / "events.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and events.stat().st_size < 20_000:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    import warnings
    log = SessionStore(root, secrets=[]).open("s1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        recs = log.records()
    assert len(recs) > 10
    assert [r.payload["i"] for r in recs] == list(range(len(recs)))   # a gapless prefix
    assert all(r.payload["blob"] == {"data": "x" * (r.payload["i"] % 700)} for r in recs)
    assert log.info()["status"] == "interrupted"

    log.acquire()
    rec = log.append("progress", {"i": len(recs)})
    assert rec.seq == recs[-1].seq + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)     # the log is clean again
        assert [r.payload["i"] for r in log.records()][-1] == len(recs)
