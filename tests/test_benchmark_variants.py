"""benchmarks/variants.py on the CPU: every contender of a small problem timed, with its error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_program_the_coder_would_try_is_timed_and_checked(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import variants
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "cache"))
    problem = tmp_path / "1_chain.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.softmax(torch.tanh(x) * 2.0, dim=-1)\n\n"
        "def get_inputs():\n    return [torch.randn(64, 1000)]\n\n"
        "def get_init_inputs():\n    return []\n")
    out = tmp_path / "rows.json"
    assert variants.main([str(problem), "--device", "cpu", "--trials", "2", "--compile", "",
                          "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    labels = [r["label"] for r in rows]
    assert labels[:2] == ["eager", "planner defaults"] and len(labels) >= 3, labels
    assert len(set(labels)) == len(labels)
    for r in rows:
        assert r["ms"] > 0 and r["err"] < 1, r   # each contender computes the same function
