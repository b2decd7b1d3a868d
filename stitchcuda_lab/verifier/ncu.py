"""Nsight Compute counters per kernel, and a bound label for each.

Runs the candidate's forward once in a child process under
``ncu --clock-control none --nvtx --nvtx-include stitch_forward/ --metrics ... --csv`` (only
kernels inside the forward's NVTX range are measured) and labels each kernel:

- memory-bound:  DRAM throughput >= 60 % of peak and at least the SM throughput;
- compute-bound: SM throughput >= 60 % of peak and above the DRAM throughput;
- latency-bound: both below 60 % (the kernel keeps neither memory nor SMs busy).

Where ncu is off or missing the result says so: ``{"available": False, "reason": ...}``.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

METRICS = ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed")
BOUND_PCT = 60.0
MAX_KERNELS = 50

_SCRIPT = r'''
import importlib.util, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod
    spec.loader.exec_module(mod); return mod
prob = load(sys.argv[1], "stitch_ncu_problem"); cand = load(sys.argv[2], "stitch_ncu_candidate")
seed = int(sys.argv[3]); dev = "cuda"
torch.manual_seed(seed); init = prob.get_init_inputs()
torch.manual_seed(seed); model = cand.ModelNew(*init).to(dev)
torch.manual_seed(seed)
xs = [x.to(dev) if hasattr(x, "to") else x for x in prob.get_inputs()]
with torch.no_grad():
    model(*xs); torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("stitch_forward"); model(*xs); torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
'''


def unavailable(reason: str) -> dict:
    return {"available": False, "reason": reason}


def classify(dram_pct: float, sm_pct: float) -> str:
    if dram_pct >= BOUND_PCT and dram_pct >= sm_pct:
        return "memory-bound"
    if sm_pct >= BOUND_PCT:
        return "compute-bound"
    return "latency-bound"


def parse_csv(text: str) -> list[dict]:
    """ncu --csv output (one row per kernel and metric) -> one dict per kernel."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        k = kernels.setdefault(r.get("ID", ""), {"name": r.get("Kernel Name", ""), "metrics": {}})
        try:
            value = float(str(r.get("Metric Value", "")).replace(",", ""))
        except ValueError:
            continue
        unit = r.get("Metric Unit", "")
        if r.get("Metric Name") == "gpu__time_duration.sum":
            value = value / {"nsecond": 1e3, "usecond": 1.0, "msecond": 1e-3}.get(unit, 1e3)
        k["metrics"][r.get("Metric Name", "")] = value
    out = []
    for k in kernels.values():
        m = k["metrics"]
        dram = m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", 0.0)
        sm = m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed", 0.0)
        out.append({"name": k["name"], "time_us": round(m.get("gpu__time_duration.sum", 0.0), 3),
                    "dram_pct": round(dram, 1), "sm_pct": round(sm, 1),
                    "bound": classify(dram, sm)})
    return out[:MAX_KERNELS]


def run(problem_path: Path, candidate_path: Path, *, seed: int, enabled: bool, device: str,
        timeout: float = 120.0) -> dict:
    if not enabled:
        return unavailable("disabled (set STITCH_NCU=1 or Settings.ncu=True)")
    if not device.startswith("cuda"):
        return unavailable("ncu measures GPU kernels; this run is on the CPU")
    exe = shutil.which("ncu")
    if exe is None:
        return unavailable("ncu is not on PATH")
    script = Path(candidate_path).parent / "ncu_forward.py"
    script.write_text(_SCRIPT)
    cmd = [exe, "--clock-control", "none", "--nvtx", "--nvtx-include", "stitch_forward/",
           "--metrics", ",".join(METRICS), "--csv", sys.executable, str(script),
           str(problem_path), str(candidate_path), str(seed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return unavailable(f"ncu took longer than {timeout:.0f} s")
    kernels = parse_csv(proc.stdout)
    if not kernels:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        return unavailable("ncu reported no kernels: " + " | ".join(tail))
    return {"available": True, "thresholds": {"bound_pct": BOUND_PCT}, "kernels": kernels}
