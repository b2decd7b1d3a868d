"""ncu.py: parsing Nsight Compute CSV and labelling kernels by what bounds them."""

from __future__ import annotations

import pytest

from stitchcuda_lab.verifier import ncu

CSV = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","fused_0","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","88.5"
"0","1","python3","h","fused_0","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","12,345"
"0","1","python3","h","fused_0","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","20.1"
"1","1","python3","h","gemm","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","30"
"1","1","python3","h","gemm","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","50"
"1","1","python3","h","gemm","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","75"
'''


def test_parse_csv_gives_one_labelled_row_per_kernel():
    rows = ncu.parse_csv(CSV)
    assert rows == [
        {"name": "fused_0", "time_us": 12.345, "dram_pct": 88.5, "sm_pct": 20.1,
         "bound": "memory-bound"},
        {"name": "gemm", "time_us": 50.0, "dram_pct": 30.0, "sm_pct": 75.0,
         "bound": "compute-bound"}]


@pytest.mark.parametrize("dram,sm,label", [(70, 20, "memory-bound"), (20, 70, "compute-bound"),
                                           (65, 80, "compute-bound"), (30, 40, "latency-bound")])
def test_thresholds(dram, sm, label):
    assert ncu.classify(dram, sm) == label


def test_unavailable_says_why(tmp_path, monkeypatch):
    off = ncu.run(tmp_path / "p.py", tmp_path / "c.py", seed=1, enabled=False, device="cuda")
    assert off == {"available": False, "reason": off["reason"]} and "disabled" in off["reason"]
    cpu = ncu.run(tmp_path / "p.py", tmp_path / "c.py", seed=1, enabled=True, device="cpu")
    assert "CPU" in cpu["reason"]
    monkeypatch.setenv("PATH", str(tmp_path))
    missing = ncu.run(tmp_path / "p.py", tmp_path / "c.py", seed=1, enabled=True, device="cuda")
    assert missing["reason"] == "ncu is not on PATH"
