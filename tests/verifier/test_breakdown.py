"""benchmarks/breakdown.py runs end to end (CPU flavour): every contender, every variant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBLEM = '''"""norm: LayerNorm + GELU on a small batch."""
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(256)

    def forward(self, x):
        return F.gelu(self.norm(x))


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''


def test_breakdown_times_every_contender_and_variant(tmp_path):
    (tmp_path / "probs").mkdir()
    (tmp_path / "probs" / "01_norm_small.py").write_text(PROBLEM)
    out = tmp_path / "breakdown.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "breakdown.py"),
                           str(tmp_path / "probs"), "--device", "cpu", "--trials", "2",
                           "--variant", 'b128:{"block": 128}', "--out", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ,
                               "STITCH_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["problem"] == "01_norm_small.py"
    # compile may be missing where Inductor has no C++ compiler; the rest must be there
    assert {"eager", "ours", "ours[b128]"} <= set(row)
    for name in ("eager", "ours", "ours[b128]"):
        assert row[name]["ms"] > 0 and row[name]["host_ms"] > 0
    assert data["floor_ms"] > 0 and "01_norm_small" in proc.stdout
