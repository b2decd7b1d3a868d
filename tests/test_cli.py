"""The command line contract: outputs, JSON fields and exit codes (0 done, 2 bad input,
1 internal error or unavailable service)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stitchcuda_lab.cli import main
from stitchcuda_lab.verdict import VERDICT_STATUSES

sys.path.insert(0, str(Path(__file__).parent))
from test_session import PROBLEM, FakeCoder, FakePlanner, FakeWorker

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def problem_file(tmp_path):
    f = tmp_path / "relu_scale.py"
    f.write_text(PROBLEM)
    return f


@pytest.fixture
def fakes(monkeypatch):
    """Route the CLI's agents and worker to the fakes (the real ones are tested elsewhere)."""
    coder = FakeCoder({0: [1.3, 1.6], 1: [2.2], 2: [2.21]})
    worker = FakeWorker()
    import stitchcuda_lab.verifier.worker as tw
    from stitchcuda_lab.agents import base
    monkeypatch.setattr(base, "get_agents", lambda name, settings: (FakePlanner(), coder))
    monkeypatch.setattr(tw, "get_worker", lambda device, settings: worker)
    monkeypatch.setenv("STITCH_PROFILE", "0")
    return coder, worker


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_optimize_json_prints_one_object_with_the_contract_fields(capsys, problem_file,
                                                                  tmp_path, fakes):
    rc, out, err = run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "3",
                       "--out", tmp_path / "s", "--json")
    assert rc == 0, err
    r = json.loads(out)                       # exactly one JSON document on stdout
    for key in ("status", "correct", "speedup_vs_eager", "speedup_vs_compile", "session_dir",
                "tasks", "best_candidate", "eager_ms", "ours_ms", "reward"):
        assert key in r
    assert r["status"] == "pass" and r["correct"] is True
    assert r["speedup_vs_eager"] == 2.21 and r["speedup_vs_compile"] is None
    assert r["tasks"] == [{"id": "t1", "kind": "pointwise_fusion", "status": "done",
                           "ops": ["mul", "relu"], "reason": ""}]
    assert Path(r["session_dir"], "events.jsonl").exists()
    assert r["eager_ms"] == 1.0 and r["ours_ms"] == pytest.approx(1 / 2.21)
    assert r["reward"] == 2 and "under noise" in r["message"]
    assert r["kept_reference"] is False
    assert "verifying" in err                  # the progress log goes to stderr


def test_optimize_says_to_keep_the_reference_when_no_candidate_beats_eager(
        capsys, problem_file, tmp_path, monkeypatch, fakes):
    from stitchcuda_lab.agents import base
    slow = FakeCoder({0: [0.8]})
    monkeypatch.setattr(base, "get_agents", lambda name, settings: (FakePlanner(), slow))
    rc, out, err = run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "0",
                       "--out", tmp_path / "s", "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert r["correct"] and r["speedup_vs_eager"] == 0.8 and r["kept_reference"] is True
    assert r["kept_reason"] == "no candidate beat eager (best 0.80x)"


def test_kept_reason_names_the_op_that_stopped_the_plan(capsys, problem_file, tmp_path,
                                                         monkeypatch, fakes):
    from stitchcuda_lab.agents import base
    from stitchcuda_lab.plan import Task

    class Keeps(FakePlanner):
        def plan(self, problem, graph, settings):
            plan = super().plan(problem, graph, settings)
            plan.tasks.append(Task(id="t9", kind="keep", ops=["cumsum"],
                                   targets=["aten.cumsum.default"],
                                   reason="cumsum: no scan template"))
            return plan
    monkeypatch.setattr(base, "get_agents", lambda name, settings: (Keeps(), FakeCoder({0: [0.9]})))
    rc, out, err = run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "0",
                       "--out", tmp_path / "s", "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert r["kept_reason"] == "cumsum: no scan template; no candidate beat eager (best 0.90x)"
    rc, out, _ = run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "0",
                     "--out", tmp_path / "s2", "--quiet")
    assert "kept      cumsum: no scan template" in out


def test_optimize_human_output(capsys, problem_file, tmp_path, fakes):
    rc, out, _ = run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "0",
                     "--out", tmp_path / "s", "--quiet")
    assert rc == 0
    assert "1.60x vs eager" in out and "pointwise_fusion" in out


def test_an_unavailable_service_reports_the_eager_baseline_and_no_speedup(
        capsys, problem_file, tmp_path, monkeypatch):
    from stitchcuda_lab.agents import base
    from stitchcuda_lab.errors import ServiceError

    class Overloaded(FakePlanner):
        def plan(self, problem, graph, settings):
            raise ServiceError("the LLM API is overloaded", hint="try again later")
    monkeypatch.setattr(base, "get_agents", lambda name, settings: (Overloaded(),
                                                                     FakeCoder({})))
    rc, out, err = run(capsys, "optimize", problem_file, "--device", "cpu", "--out",
                       tmp_path / "s", "--json", "--quiet")
    assert rc == 1
    r = json.loads(out)
    assert r["status"] == "error" and r["correct"] is False
    assert r["speedup_vs_eager"] is None and r["best_candidate"] is None
    assert r["eager_ms"] is not None and r["eager_ms"] > 0
    assert Path(r["session_dir"], "meta.json").exists()
    assert "the LLM API is overloaded (hint: try again later)" in err


def test_a_syntax_error_exits_2_with_one_line_naming_file_and_line(capsys, tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("import torch\nclass Model(torch.nn.Module)\n    pass\n")
    rc, out, err = run(capsys, "optimize", f, "--device", "cpu", "--out", tmp_path / "s")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and f"{f}:2:" in err and "Traceback" not in err


def test_a_missing_problem_file_exits_2(capsys, tmp_path):
    rc, _, err = run(capsys, "optimize", tmp_path / "nope.py", "--out", tmp_path / "s")
    assert rc == 2 and "does not exist" in err


def test_a_problem_breaking_the_contract_exits_2_with_its_line(capsys, tmp_path):
    f = tmp_path / "badfwd.py"
    f.write_text(PROBLEM.replace("return torch.relu(x * self.w)",
                                 "return torch.relu(x @ self.w.view(2, 4))"))
    rc, _, err = run(capsys, "optimize", f, "--device", "cpu", "--out", tmp_path / "s")
    assert rc == 2 and f"{f}:10:" in err and "forward raised" in err


def test_an_internal_error_exits_1_and_shows_a_traceback_only_with_debug(
        capsys, problem_file, tmp_path, monkeypatch):
    import stitchcuda_lab.session as session_mod

    def boom(*a, **k):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(session_mod, "load_problem", boom)
    rc, _, err = run(capsys, "optimize", problem_file, "--device", "cpu", "--out",
                     tmp_path / "s", "--quiet")
    assert rc == 1 and "internal error: RuntimeError: disk on fire" in err
    assert "Traceback" not in err
    rc, _, err = run(capsys, "optimize", problem_file, "--device", "cpu", "--out",
                     tmp_path / "s", "--quiet", "--debug")
    assert rc == 1 and "Traceback" in err


def test_an_llm_agent_without_its_api_key_exits_2_before_any_work(capsys, problem_file,
                                                                  tmp_path, monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))          # no profile with a key either
    rc, out, err = run(capsys, "optimize", problem_file, "--agent", "claude", "--out",
                       tmp_path / "s", "--quiet")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "API key" in err or "ANTHROPIC_API_KEY" in err
    assert not (tmp_path / "s").exists()


def test_an_unknown_agent_is_bad_input(capsys, problem_file, tmp_path):
    with pytest.raises(SystemExit) as ei:
        main(["optimize", str(problem_file), "--agent", "gpt-9"])
    assert ei.value.code == 2


def test_sessions_lists_and_shows(capsys, problem_file, tmp_path, fakes):
    root = tmp_path / "s"
    run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "0", "--out", root,
        "--json", "--quiet")
    rc, out, _ = run(capsys, "sessions", "--out", root, "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == 1 and rows[0]["status"] == "done"
    sid = rows[0]["id"]
    rc, out, _ = run(capsys, "sessions", "show", sid[:12], "--out", root)
    assert rc == 0 and sid in out and "[done]" in out and "pass" in out
    rc, out, _ = run(capsys, "sessions", "show", sid, "--out", root, "--json")
    assert json.loads(out)["result"]["best_candidate"]
    rc, _, err = run(capsys, "sessions", "show", "nope", "--out", root)
    assert rc == 2 and "no session 'nope'" in err


def test_resume_carries_an_interrupted_session_on(capsys, tmp_path, fakes, settings):
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session
    root = tmp_path / "s"
    s = Session.create(problem_from_source(PROBLEM), settings.replace(sessions_dir=str(root),
                                                                      iters=1),
                       device="cpu", planner=FakePlanner(), coder=FakeCoder({}),
                       worker=FakeWorker())
    s.advance()                                  # planned, waiting for approval
    s.log.release()                              # as if the process had died
    s.log.update_meta(status="running")
    rc, out, _ = run(capsys, "sessions", "--out", root, "--json")
    assert json.loads(out)[0]["status"] == "interrupted"
    rc, out, err = run(capsys, "resume", s.id, "--out", root, "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert r["phase"] == "done" and r["status"] == "pass" and r["session_id"] == s.id
    assert fakes[0].calls[0][0] == 0


def test_export_writes_model_and_trajectories(capsys, problem_file, tmp_path, fakes):
    root = tmp_path / "s"
    run(capsys, "optimize", problem_file, "--device", "cpu", "--iters", "0", "--out", root,
        "--quiet")
    sid = json.loads(run(capsys, "sessions", "--out", root, "--json")[1])[0]["id"]
    rc, out, _ = run(capsys, "export", sid, "--to", tmp_path / "x", "--out", root,
                     "--trajectories")
    assert rc == 0 and "model_new.py" in out
    assert "class ModelNew" in (tmp_path / "x" / "model_new.py").read_text()
    assert (tmp_path / "x" / "trajectories.jsonl").exists()


def test_a_broken_bench_or_doctor_module_is_an_internal_error_in_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "stitchcuda_lab.bench", None)
    rc, _, err = run(capsys, "bench", "benchmarks/problems")
    assert rc == 1 and err.count("\n") == 1 and "internal error" in err
    monkeypatch.setitem(sys.modules, "stitchcuda_lab.doctor", None)
    rc, _, err = run(capsys, "doctor")
    assert rc == 1 and "internal error" in err and "stitchcuda_lab.doctor" in err


def test_doctor_runs_through_its_own_module(capsys, monkeypatch):
    import types
    seen = {}
    mod = types.ModuleType("stitchcuda_lab.doctor")
    mod.main_doctor = lambda args: seen.setdefault("json", args.json) and 0
    monkeypatch.setitem(sys.modules, "stitchcuda_lab.doctor", mod)
    assert run(capsys, "doctor", "--json")[0] == 0 and seen == {"json": True}


def test_verify_a_missing_candidate_exits_2(capsys, problem_file, tmp_path):
    rc, _, err = run(capsys, "verify", problem_file, tmp_path / "none.py")
    assert rc == 2 and "does not exist" in err


def _worker_missing():
    try:
        from stitchcuda_lab.verifier.worker import verify_files  # noqa: F401
        return False
    except ImportError:
        return True


@pytest.mark.skipif(_worker_missing(), reason="the Verifier's worker is not installed yet")
def test_verify_json_reports_a_verdict_status_and_exits_0(capsys, problem_file, tmp_path,
                                                          settings, monkeypatch):
    cand = tmp_path / "cand.py"
    cand.write_text(textwrap.dedent(PROGRAM_FALLBACK))
    monkeypatch.setenv("STITCH_CACHE_DIR", settings.cache_dir)
    monkeypatch.setenv("STITCH_TIMING_TRIALS", "3")
    monkeypatch.setenv("STITCH_COMPILE_MODES", "")
    rc, out, err = run(capsys, "verify", problem_file, cand, "--device", "cpu", "--json")
    assert rc == 0, err
    r = json.loads(out)
    assert r["status"] in VERDICT_STATUSES
    for key in ("status", "reason", "max_abs_err", "speedup_vs_eager"):
        assert key in r
    # computing everything with PyTorch ops is a fallback, not an optimisation
    assert r["status"] == "rejected" and r["reason"]


PROGRAM_FALLBACK = """\
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.randn(n))

        def forward(self, x):
            return torch.relu(x * self.w)
    """


def test_the_console_entry_point_runs_as_a_module(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("def get_inputs(:\n")
    proc = subprocess.run([sys.executable, "-m", "stitchcuda_lab", "optimize", str(f)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and f"{f}:1:" in proc.stderr


# --- the LLM agents through the CLI: the real Claude client against the local fake API -----

LLM_FIXTURES = ROOT / "tests" / "fixtures" / "llm"


@pytest.fixture
def llm(monkeypatch, tmp_path):
    """The claude agent with a key, the scripted Verifier, and the fake Messages API helpers."""
    pytest.importorskip("anthropic")
    sys.path.insert(0, str(LLM_FIXTURES))
    import fake_api
    import scripted
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-CLI-TEST-KEY-0000")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    monkeypatch.setenv("STITCH_PROFILE", "0")
    monkeypatch.setenv("STITCH_LLM_BACKOFF", "0.001")
    worker = scripted.ScriptedWorker({1: 1.3, 2: 1.5, 3: 1.6})
    import stitchcuda_lab.verifier.worker as tw
    monkeypatch.setattr(tw, "get_worker", lambda device, settings: worker)
    return fake_api, scripted, worker


def _optimize(capsys, tmp_path, api, *extra):
    return run(capsys, "optimize", LLM_FIXTURES / "bias_gelu_scale_problem.py", "--device",
               "cpu", "--agent", "claude", "--base-url", api.url, "--out", tmp_path / "s",
               "--json", *extra)


@pytest.mark.parametrize("status,kind,words,code", [
    (401, "authentication_error", "rejected the API key", 2),
    (404, "not_found_error", "does not know the model", 2),
    (400, "invalid_request_error", "rejected the request (400)", 1)])
def test_an_error_mid_run_still_prints_one_json_object_with_the_session(
        capsys, tmp_path, llm, status, kind, words, code):
    fake, _, _ = llm
    script = [fake.ok("plan_reply.json"), fake.error(status, kind, "no", None)]
    with fake.FakeAPI(script) as api:
        rc, out, err = _optimize(capsys, tmp_path, api, "--iters", "0")
    assert rc == code
    r = json.loads(out)                                     # exactly one JSON document
    assert r["status"] == "error" and words in r["error"]["message"]
    assert r["error"]["exit_code"] == code and r["spend"]["exchanges"] == 1
    assert Path(r["session_dir"], "events.jsonl").exists() and r["tasks"]
    assert err.splitlines()[-1].startswith("stitchcuda-lab: error: ") and words in err
    rc, out, _ = run(capsys, "sessions", "--out", tmp_path / "s", "--json")
    assert json.loads(out)[0]["status"] == "paused"


def test_max_cost_stops_cleanly_and_resume_with_a_higher_cap_finishes(capsys, tmp_path, llm):
    fake, scripted, _ = llm
    plan_cost = (3184 * 3 + 412 * 15 + 2930 * 3.75) / 1e6
    script = [fake.ok("plan_reply.json"), fake.ok(scripted.variant(1))]
    with fake.FakeAPI(script) as api:
        rc, out, err = _optimize(capsys, tmp_path, api, "--iters", "1", "--max-cost",
                                 f"{plan_cost * 1.5:.6f}")
    assert rc == 0, err
    r = json.loads(out)
    assert r["status"] == "stopped" and r["error"]["type"] == "BudgetExceeded"
    assert r["best_candidate"] == scripted.cid(1) and api.count == 2
    assert r["spend"]["cost_usd"] >= plan_cost and "stopped:" in err
    with fake.FakeAPI([fake.ok(scripted.variant(2))]) as api:
        rc, out, err = run(capsys, "resume", r["session_id"], "--out", tmp_path / "s",
                           "--max-cost", "1", "--base-url", api.url, "--json", "--quiet")
    assert rc == 0, err
    again = json.loads(out)
    assert again["phase"] == "done" and again["best_candidate"] == scripted.cid(2)
    assert again["spend"]["exchanges"] == 3 and set(again["spend"]["by_iteration"]) == {
        "plan", "0", "1"}


def test_candidates_model_and_base_url_reach_the_agent(capsys, tmp_path, llm):
    fake, scripted, worker = llm
    served = [fake.recorded("plan_reply.json"), scripted.variant(1), scripted.variant(2)]
    for m in served:
        m["model"] = "qwen3-coder:30b"
    with fake.FakeAPI([fake.ok(m) for m in served]) as api:
        rc, out, err = _optimize(capsys, tmp_path, api, "--iters", "0", "--candidates", "2",
                                 "--model", "qwen3-coder:30b")
    assert rc == 0, err
    assert {r["body"]["model"] for r in api.requests} == {"qwen3-coder:30b"}
    assert sorted(worker.verified) == [1, 2]
    r = json.loads(out)
    assert r["best_candidate"] == scripted.cid(2) and r["spend"]["cost_usd"] == 0.0  # local
    assert "sample 2 of 2" in api.requests[2]["body"]["messages"][0]["content"]


@pytest.mark.parametrize("flag,value", [("--candidates", "0"), ("--max-cost", "-1"),
                                        ("--max-tokens", "-5")])
def test_bad_llm_options_are_bad_input(capsys, tmp_path, flag, value):
    rc, _, err = run(capsys, "optimize", tmp_path / "x.py", "--out", tmp_path / "s", flag,
                     value)
    assert rc == 2 and flag in err


def test_a_password_in_the_base_url_is_never_written(capsys, tmp_path, llm, monkeypatch):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                  # closed again: nothing listens there
    url = f"http://stitch:hunter2-PW@127.0.0.1:{port}/?api_key=qwerty-KEY"
    monkeypatch.setenv("STITCH_LLM_RETRIES", "1")
    rc, out, err = run(capsys, "optimize", LLM_FIXTURES / "bias_gelu_scale_problem.py",
                       "--device", "cpu", "--agent", "claude", "--base-url", url, "--out",
                       tmp_path / "s", "--json", "--iters", "0", "--debug")
    assert rc == 1 and "cannot reach Claude" in json.loads(out)["error"]["message"]
    written = out + err + "".join(p.read_text(errors="replace")
                                  for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert "[redacted]@127.0.0.1" in written
    assert "hunter2-PW" not in written and "qwerty-KEY" not in written


def test_optimize_says_when_the_hosts_load_changed_while_it_was_timed(capsys):
    from stitchcuda_lab.cli import _print_result
    r = {"problem": "p", "device": "cpu", "agent": "offline", "session_dir": "s", "tasks": [],
         "eager_ms": 5.0, "eager_ms_source": "", "best_candidate": "c1", "status": "pass",
         "ours_ms": 0.01, "speedup_vs_eager": 500.0, "speedup_vs_compile": None,
         "kept_reference": False, "message": "", "warnings": [],
         "flags": ["host_load_changed:eager 49.2->3.75 ms"]}
    _print_result(r, as_json=False)
    assert "compare two loads" in capsys.readouterr().out
    _print_result(dict(r, flags=[]), as_json=False)
    assert "compare two loads" not in capsys.readouterr().out
