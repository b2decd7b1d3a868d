"""ruff's default rules hold over the package, tests, benchmarks, examples and notebooks."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install 'stitchcuda-lab[dev]')")
    proc = subprocess.run([ruff, "check", "--output-format", "concise", "stitchcuda_lab", "tests",
                           "benchmarks", "examples", "notebooks"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
