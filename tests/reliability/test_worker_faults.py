"""Worker faults beyond tests/verifier/test_worker.py (crash, hang, memory exhaustion are there):
a candidate that leaks memory across jobs, problem inputs too large for the worker, a forged
reply on the worker's pipe. Each time the caller carries on and the next good candidate passes.
"""

from __future__ import annotations

import time

import pytest

from stitchcuda_lab.verifier.options import VerifyOptions
from stitchcuda_lab.verifier.worker import Worker

from .conftest import ADV

POINTWISE = (ADV / "problems" / "pointwise.py").read_text()
GOOD = (ADV / "candidates" / "pass_c_kernel.py").read_text()
BIG_POINTWISE = POINTWISE.replace("torch.randn(64, 96)", "torch.randn(1024, 4096)")  # 16 MB
HUGE_POINTWISE = POINTWISE.replace("torch.randn(64, 96)", "torch.randn(32768, 32768)")  # 4 GiB

LEAK = GOOD.replace('''    def forward(self, x):
''', '''    def forward(self, x):
        LEAKED.append(torch.ones(64 * 1024 * 1024 // 4))   # 64 MB a call, never freed
''').replace("class ModelNew", '''# survives the job: torch outlives the candidate's module
LEAKED = torch.__dict__.setdefault("_stitch_test_leak", [])


class ModelNew''')
LIMIT = 2 << 30


@pytest.fixture
def options():
    return VerifyOptions(trials=5, timing_trials=3, warmup=1, compile_modes="", profile=False,
                         cpu_flush_mb=16)


@pytest.fixture
def limited_worker(tmp_path):
    import torch
    if torch.version.cuda:
        # its CUDA libraries map more address space than LIMIT at import, GPU or not: the
        # judge cannot start under it (MemoryError while importing), whatever a candidate does
        pytest.skip("a CUDA build of torch maps more than 2 GiB of address space at import; "
                    "the limit is tested with the CPU build")
    w = Worker("cpu", cache_dir=str(tmp_path / "cache"), memory_limit=LIMIT)
    yield w
    w.close()


def test_a_leaking_candidate_runs_out_of_memory_and_the_next_one_gets_a_fresh_process(
        limited_worker, options):
    assert "LEAKED.append" in LEAK
    t0 = time.monotonic()
    v = limited_worker.verify(BIG_POINTWISE, LEAK, replaced=None, options=options, timeout=60)
    assert time.monotonic() - t0 < 60
    assert v.status == "runtime_error" and v.reason.startswith("out_of_memory"), v.reason
    pid = limited_worker.pid
    assert pid is not None   # the judge never held the leak: it went with the candidate's process
    again = limited_worker.verify(BIG_POINTWISE, GOOD, replaced=None, options=options,
                                  timeout=60)
    assert again.status == "pass", again.reason


def test_inputs_too_large_for_the_worker_are_named_with_their_size(limited_worker, options):
    t0 = time.monotonic()
    v = limited_worker.verify(HUGE_POINTWISE, GOOD, replaced=None, options=options, timeout=60)
    assert time.monotonic() - t0 < 30
    assert v.status == "runtime_error" and v.reason.startswith("out_of_memory"), v.reason
    assert "get_inputs()" in v.reason and "4.00 GiB asked" in v.reason
    assert "limit is 2.00 GiB" in v.reason
    good = limited_worker.verify(POINTWISE, GOOD, replaced=None, options=options, timeout=60)
    assert good.status == "pass", good.reason


def test_inputs_too_large_fail_validation_with_the_size_before_any_worker_runs():
    from stitchcuda_lab.errors import ProblemError
    from stitchcuda_lab.problem import problem_from_source, validate
    huge = POINTWISE.replace("torch.randn(64, 96)", "torch.empty(1 << 40, dtype=torch.uint8)")
    with pytest.raises(ProblemError, match="get_inputs\\(\\) raised.*1099511627776 bytes"):
        validate(problem_from_source(huge), timeout=60)


def test_a_forged_reply_on_the_pipe_never_shifts_later_verdicts(tmp_path, options):
    forged = (ADV / "candidates" / "forged_protocol_frame.py").read_text()
    fallback = (ADV / "candidates" / "fallback_functional.py").read_text()
    with Worker("cpu", cache_dir=str(tmp_path / "cache")) as w:
        bad = w.verify(POINTWISE, forged, replaced=None, options=options, timeout=60)
        assert bad.status == "rejected" and bad.reason.startswith("protocol_tampering")
        # before the nonce, the next job read the previous job's real reply
        nxt = w.verify(POINTWISE, fallback, replaced=None, options=options, timeout=60)
        assert nxt.status == "rejected" and nxt.reason.startswith("pytorch_fallback")
        assert "aten.relu.default" in nxt.aten_ops
        assert w.verify(POINTWISE, GOOD, replaced=None, options=options,
                        timeout=60).status == "pass"
