"""trace.py: chrome trace -> timeline rows and per-kernel summary (pure, no torch)."""

from __future__ import annotations

import json
import subprocess
import sys

from stitchcuda_lab import trace

TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 11, "ts": 1000.0, "dur": 30},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 11,
     "ts": 1010.0, "dur": 5},
    {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 1020.0, "dur": 4,
     "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 1030.0, "dur": 6,
     "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 13, "ts": 1040.0, "dur": 30,
     "args": {"stream": 13}},
    {"ph": "i", "cat": "instant", "name": "marker", "pid": 1, "tid": 11, "ts": 900.0},
    {"ph": "f", "cat": "ac2g", "name": "flow", "pid": 1, "tid": 11, "ts": 1011.0},
]}


def test_rows_are_relative_to_the_first_event_and_laned():
    rows = trace.timeline(TRACE)
    assert rows[0] == {"lane": "CPU thread 11", "name": "aten::add", "start_us": 0.0,
                       "dur_us": 30.0, "cat": "cpu_op"}
    assert {r["lane"] for r in rows} == {"CPU thread 11", "stream 7", "stream 13"}
    assert [r["start_us"] for r in rows] == sorted(r["start_us"] for r in rows)
    assert all(r["cat"] not in ("instant", "ac2g") for r in rows)


def test_kernel_summary_counts_totals_and_shares():
    s = trace.kernel_summary(TRACE)
    assert s[0] == {"name": "gemm", "count": 1, "total_us": 30.0, "share": 0.75}
    assert s[1] == {"name": "add_kernel", "count": 2, "total_us": 10.0, "share": 0.25}


def test_cpu_only_trace_summarises_top_level_ops():
    cpu = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "tid": 1, "ts": 1, "dur": 8},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "tid": 1, "ts": 12, "dur": 2}]}
    assert [r["name"] for r in trace.kernel_summary(cpu)] == ["aten::linear", "aten::relu"]


def test_rows_are_capped_keeping_the_longest():
    many = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": f"k{i}", "tid": 7, "ts": i,
                             "dur": i, "args": {"stream": 7}} for i in range(100)]}
    rows = trace.timeline(many, max_rows=10)
    assert len(rows) == 10 and min(r["dur_us"] for r in rows) == 90.0


def test_streams_and_file_input(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(TRACE))
    assert trace.streams(p) == {"7", "13"}
    assert trace.timeline(p) == trace.timeline(TRACE)


def test_trace_imports_no_torch():
    code = "import sys, stitchcuda_lab.trace; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
