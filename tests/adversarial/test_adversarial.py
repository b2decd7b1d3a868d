"""Every candidate in candidates/ (CPU) and cuda/ (GPU) goes through the real Worker and must get
the verdict its header names: ``# expect: <status> [<reason>]`` against ``# problem: <name>``
(alternatives separated by `` | `` where the allocator decides which of two names applies).

Hacks must be rejected with their stable reason name; legitimate unusual candidates must pass.
A representative subset also goes through the real command line, ``stitchcuda-lab verify
--json``, in a subprocess.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stitchcuda_lab.verdict import load_changed
from stitchcuda_lab.verifier.options import VerifyOptions
from stitchcuda_lab.verifier.worker import Worker

HERE = Path(__file__).parent


def _cases(folder: str) -> list:
    """The candidates of a folder; one whose header says ``# limit: why`` is a known limit of
    the Verifier (docs/RELIABILITY.md): expected to get past it, strictly (it fails the suite
    the day it is caught, so the header and the doc are updated), unless its header also says
    ``# caught sometimes: why`` (a hole that the host's timing opens in most runs, not all)."""
    out = []
    for p in sorted((HERE / folder).glob("*.py")):
        limit = re.search(r"^# limit: (.+)$", p.read_text(), re.MULTILINE)
        sometimes = re.search(r"^# caught sometimes: (.+)$", p.read_text(), re.MULTILINE)
        marks = [pytest.mark.xfail(strict=not sometimes, reason=limit.group(1))] if limit else []
        out.append(pytest.param(p, marks=marks, id=p.stem))
    return out


CPU = _cases("candidates")
GPU = _cases("cuda")
# One of each kind of check, through `stitchcuda-lab verify --json` in a subprocess.
CLI_SUBSET = ["fallback_try_except", "cached_static_c", "lazy_tensor_subclass", "hardcoded_table",
              "forged_protocol_frame", "verdict_in_comments", "pass_gemm_kept"]


def header(path: Path) -> tuple[str, list[tuple[str, str | None]]]:
    """(problem name, accepted (status, reason) pairs) from a candidate's header."""
    text = path.read_text()
    problem = re.search(r"^# problem: (\S+)", text, re.MULTILINE).group(1)
    accepted = []
    for alt in re.search(r"^# expect: (.+)$", text, re.MULTILINE).group(1).split(" | "):
        status, _, reason = alt.strip().partition(" ")
        accepted.append((status, reason.strip() or None))
    return problem, accepted


def reason_name(reason: str) -> str:
    return reason.split(":", 1)[0].split(" ")[0]


def check(worker: Worker, path: Path, options: VerifyOptions) -> None:
    problem, accepted = header(path)
    limit = re.search(r"^# timeout: (\d+)", path.read_text(), re.MULTILINE)
    # a hack that needs the judge's timed calls to span rounds asks for as many as it runs with
    timed = re.search(r"^# timing trials: (\d+)", path.read_text(), re.MULTILINE)
    if timed:
        options = dataclasses.replace(options, timing_trials=int(timed.group(1)))
    # one that plays with the cache asks for the default flush (0) or another size
    flush = re.search(r"^# cpu flush mb: (\d+)", path.read_text(), re.MULTILINE)
    if flush:
        options = dataclasses.replace(options, cpu_flush_mb=int(flush.group(1)))
    verdict = worker.verify((HERE / "problems" / f"{problem}.py").read_text(), path.read_text(),
                            replaced=None, options=options,
                            timeout=float(limit.group(1)) if limit else 120.0)
    got = (verdict.status, reason_name(verdict.reason) if verdict.reason else None)
    assert got in accepted or (got[0], None) in accepted, (
        f"{path.name}: {verdict.status} {verdict.reason}\n{verdict.build_log[-2000:]}")
    if verdict.status == "pass":
        assert verdict.correct and len(verdict.trials) >= options.trials
        assert all(t.ok for t in verdict.trials)
        # a hack let through where its hidden work is counted: it must claim no speed-up
        bound = re.search(r"^# pass at most: ([\d.]+)x", path.read_text(), re.MULTILINE)
        # unless the verdict says the host's load changed between the baselines and the
        # candidate's calls: its ratio compares two loads (seen beside another test process:
        # the path calibrated in a busy moment, the candidate's calls timed in a quiet one),
        # and a session ranks it below every steady verdict (loop._best)
        steady = not load_changed(verdict.flags)
        if bound and steady:
            assert verdict.speedup_vs_eager is not None \
                and verdict.speedup_vs_eager <= float(bound.group(1)), (
                    f"{path.name}: passed at {verdict.speedup_vs_eager}x eager, more than the "
                    f"{bound.group(1)}x its hidden work allows")


@pytest.fixture(scope="module")
def cpu_worker(tmp_path_factory):
    w = Worker("cpu", cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield w
    w.close()


@pytest.mark.parametrize("path", CPU)
def test_cpu_candidate_gets_its_expected_verdict(cpu_worker, path):
    check(cpu_worker, path, VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="",
                                          profile=False, cpu_flush_mb=16))


def cli_env(cache_dir: Path) -> dict[str, str]:
    """Fast, isolated settings for the command line (a lone ',' is an empty compile list)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STITCH_")}
    env.update(STITCH_CACHE_DIR=str(cache_dir), STITCH_TIMING_TRIALS="3", STITCH_WARMUP="1",
               STITCH_COMPILE_MODES=",", STITCH_PROFILE="0", STITCH_TIMEOUT="120",
               STITCH_CPU_FLUSH_MB="16")
    return env


@pytest.mark.parametrize("name", CLI_SUBSET)
def test_cli_verify_json_gives_the_expected_verdict(name, tmp_path_factory):
    path = HERE / "candidates" / f"{name}.py"
    problem, accepted = header(path)
    proc = subprocess.run(
        [sys.executable, "-m", "stitchcuda_lab", "verify", str(HERE / "problems" /
                                                               f"{problem}.py"),
         str(path), "--device", "cpu", "--json"],
        capture_output=True, text=True, timeout=240, check=False,
        env=cli_env(tmp_path_factory.getbasetemp() / "cli_cache"))
    assert proc.returncode == 0, proc.stderr      # a rejected candidate is still a job done
    (line,) = proc.stdout.strip().splitlines()   # exactly one JSON object
    r = json.loads(line)
    got = (r["status"], reason_name(r["reason"]) if r["reason"] else None)
    assert got in accepted, (name, r["status"], r["reason"])
    if r["status"] != "pass":
        assert r["speedup_vs_eager"] is None and r["reward"] == -1


@pytest.fixture(scope="module")
def gpu_worker(tmp_path_factory):
    w = Worker("cuda", cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield w
    w.close()


@pytest.mark.gpu
@pytest.mark.parametrize("path", GPU)
def test_cuda_candidate_gets_its_expected_verdict(gpu_worker, path):
    check(gpu_worker, path, VerifyOptions(trials=5, timing_trials=5, warmup=2, compile_modes="",
                                          profile=False))


@pytest.mark.gpu
def test_worker_recovers_after_an_illegal_memory_access(gpu_worker):
    opts = VerifyOptions(trials=5, timing_trials=5, warmup=1, compile_modes="", profile=False)
    problem = (HERE / "problems" / "pointwise.py").read_text()
    bad = gpu_worker.verify(problem, (HERE / "cuda" / "illegal_access.py").read_text(),
                            replaced=None, options=opts, timeout=120)
    assert bad.status == "runtime_error" and bad.reason.startswith("cuda_error")
    good = gpu_worker.verify(problem, (HERE / "cuda" / "pass_nvrtc.py").read_text(),
                             replaced=None, options=opts, timeout=120)
    assert good.status == "pass", good.reason
