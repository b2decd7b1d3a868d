"""Every candidate in candidates/ (CPU) and cuda/ (GPU) goes through the real Worker and must get
the verdict its header names: ``# expect: <status> [<reason>]`` against ``# problem: <name>``.

Hacks must be rejected with their stable reason name; legitimate unusual candidates must pass.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stitchcuda_lab.toolchain.verify import VerifyOptions
from stitchcuda_lab.toolchain.worker import Worker

HERE = Path(__file__).parent
CPU = sorted((HERE / "candidates").glob("*.py"))
GPU = sorted((HERE / "cuda").glob("*.py"))


def header(path: Path) -> tuple[str, str, str | None]:
    text = path.read_text()
    problem = re.search(r"^# problem: (\S+)", text, re.M).group(1)
    status, _, reason = re.search(r"^# expect: (.+)$", text, re.M).group(1).partition(" ")
    return problem, status, reason.strip() or None


def check(worker: Worker, path: Path, options: VerifyOptions) -> None:
    problem, status, reason = header(path)
    limit = re.search(r"^# timeout: (\d+)", path.read_text(), re.M)
    verdict = worker.verify((HERE / "problems" / f"{problem}.py").read_text(), path.read_text(),
                            replaced=None, options=options,
                            timeout=float(limit.group(1)) if limit else 120.0)
    got = verdict.reason.split(":", 1)[0].split(" ")[0]
    assert (verdict.status, got if reason else None) == (status, reason), (
        f"{path.name}: {verdict.status} {verdict.reason}\n{verdict.build_log[-2000:]}")
    if status == "pass":
        assert verdict.correct and len(verdict.trials) >= options.trials
        assert all(t.ok for t in verdict.trials)


@pytest.fixture(scope="module")
def cpu_worker(tmp_path_factory):
    w = Worker("cpu", cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield w
    w.close()


@pytest.mark.parametrize("path", CPU, ids=lambda p: p.stem)
def test_cpu_candidate_gets_its_expected_verdict(cpu_worker, path):
    check(cpu_worker, path, VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="",
                                          profile=False))


@pytest.fixture(scope="module")
def gpu_worker(tmp_path_factory):
    w = Worker("cuda", cache_dir=str(tmp_path_factory.mktemp("cache")))
    yield w
    w.close()


@pytest.mark.gpu
@pytest.mark.parametrize("path", GPU, ids=lambda p: p.stem)
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
