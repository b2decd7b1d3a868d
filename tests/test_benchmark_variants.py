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
    assert labels[:2] == ["eager", "planner defaults"] and len(set(labels)) == len(labels)

    for r in rows:
        assert r["ms"] > 0 and r["err"] < 1, r   # each contender computes the same function


def test_the_contenders_are_every_variant_the_refine_rounds_reach(settings):
    """Not only the first round's few (``MAX_VARIANTS``): a softmax planned for the GPU has
    more block sizes, row strategies and caches than one round takes."""
    import dataclasses

    from stitchcuda_lab.agents.offline import OfflinePlanner
    from stitchcuda_lab.agents.offline.coder import MAX_VARIANTS
    from stitchcuda_lab.graph import analyse
    from stitchcuda_lab.problem import problem_from_source

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import variants
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    problem = problem_from_source(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.softmax(x * 2.0, dim=-1)\n\n"
        "def get_inputs():\n    return [torch.randn(64, 1000)]\n\n"
        "def get_init_inputs():\n    return []\n", name="sm")
    graph = dataclasses.replace(analyse(problem, device="cpu", profile=False,
                                        settings=settings), device="cuda")
    found = variants.contenders(problem, graph, OfflinePlanner().plan(problem, graph, settings))
    labels = [label for label, _ in found]
    assert labels[0] == "planner defaults" and len(set(labels)) == len(labels)
    assert len(labels) > 1 + MAX_VARIANTS, labels
    assert len({c.digest() for _, c in found}) == len(found)
