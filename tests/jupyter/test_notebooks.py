"""Every tutorial runs headless under papermill on the CPU with its default (tiny) parameters."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NAMES = ["01_quickstart.ipynb", "02_human_in_the_loop.ipynb", "03_reading_profiles.ipynb",
         "04_claude_agent.ipynb", "05_model_from_file.ipynb"]


def test_notebooks_are_built_from_build_notebooks_py():
    sys.path.insert(0, str(NOTEBOOKS))
    try:
        import build_notebooks
    finally:
        sys.path.remove(str(NOTEBOOKS))
    built = build_notebooks.build()
    assert sorted(built) == NAMES
    for name, text in built.items():
        assert (NOTEBOOKS / name).read_text() == text, f"{name} is stale: run build_notebooks.py"


@pytest.mark.parametrize("name", NAMES)
def test_first_code_cell_is_tagged_parameters(name):
    import nbformat
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "parameters" in first.metadata.get("tags", [])
    assert 'device = "auto"' in first.source


@pytest.mark.parametrize("name", NAMES)
def test_every_code_cell_is_valid_ipython(name):
    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        source = cell.source
        if source.startswith("%%stitch"):
            source = source.split("\n", 1)[1]     # the cell magic's body is plain Python
        compile(TransformerManager().transform_cell(source), f"{name} code cell {i}", "exec")


# 03's verdict holds no timeline rows since the Verifier moved candidates into processes of
# their own (seen 2026-12-01, cause not yet found): kept visible as an expected failure
_KNOWN: dict[str, str] = {}   # notebook -> why it is expected to fail headless (none now)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.xfail(reason=_KNOWN[n])])
                                  if n in _KNOWN else n for n in NAMES])
def test_notebook_runs_headless(name, tmp_path, monkeypatch):
    import nbformat
    import papermill as pm

    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)   # 04 must fall back on its own
    params = {"sessions_dir": str(tmp_path / "sessions")}
    out = tmp_path / name
    pm.execute_notebook(str(NOTEBOOKS / name), str(out), parameters=params, cwd=str(tmp_path),
                        kernel_name="python3", execution_timeout=300, progress_bar=False,
                        log_output=False)
    nb = nbformat.read(out, as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    text = "\n".join(o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells for o in c.get("outputs", []))
    if name.startswith("01"):
        assert "max abs difference" in text
        assert (tmp_path / "exported_quickstart").is_dir()
    if name.startswith("02"):
        for said in ("your edit", "incorrect", "build_error", "error:", "closed session",
                     "your passing edit"):
            assert said in text, said
        # the refine round keeps the edit, or says plainly why it cannot (a CPU row kernel)
        assert "keeps your edit" in text or "cannot refine the hand edit" in text
    if name.startswith("03"):
        assert re.search(r"candidate: traced +\d+ us, timed median +\d+ us \([+-]\d+%\)", text)
    if name.startswith("04"):
        assert "replayed from recordings/claude_bias_gelu_scale.jsonl" in text
        assert "3 LLM exchange(s)" in text and "best: pass" in text
    if name.startswith("05"):
        assert (tmp_path / "exported_conv_block").is_dir()
