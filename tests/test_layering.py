"""Dependency direction: the pure core imports no GPU, notebook or LLM libraries; nothing
imports the notebook layer; the package's public API is exactly its lazy ``__all__``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "stitchcuda_lab"
FORBIDDEN = ("torch.cuda", "IPython", "ipywidgets", "plotly", "anthropic")
# Leaves: import nothing of the package (and no torch), so every module may use them.
LEAVES = ["stitchcuda_lab.aten", "stitchcuda_lab.agents.offline.helpers"]
PURE = ["stitchcuda_lab.plan", "stitchcuda_lab.loop", "stitchcuda_lab.trace",
        "stitchcuda_lab.store", "stitchcuda_lab.agents.offline", "stitchcuda_lab.agents.rubric"]


def _submodules(name: str) -> list[str]:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [f"{name}.{m.name}" for m in pkgutil.iter_modules(spec.submodule_search_locations)]


def _modules_after_import(module: str) -> list[str]:
    code = (f"import importlib, json, sys; importlib.import_module({module!r}); "
            "print(json.dumps(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _pure_modules() -> list[str]:
    mods = []
    for m in PURE:
        if not _present(m):
            continue
        mods.append(m)
        if m.endswith("agents.offline"):
            mods += _submodules(m)
    return mods


@pytest.mark.parametrize("module", _pure_modules())
def test_core_modules_import_no_gpu_notebook_or_llm_library(module):
    loaded = _modules_after_import(module)
    bad = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, f"{module} pulls in {bad[:5]}"


@pytest.mark.parametrize("module", LEAVES)
def test_leaf_modules_import_nothing_of_the_package_and_no_torch(module):
    path = PKG.parent / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(), filename=str(path))
    own = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            names = ["." * n.level + (n.module or "")]
        elif isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        else:
            continue
        if any(m.startswith((".", "stitchcuda_lab")) for m in names):
            own.append(n.lineno)
    assert not own, f"{module} imports the package at lines {own}"
    loaded = _modules_after_import(module)
    assert "torch" not in loaded


def test_importing_the_package_is_light():
    loaded = _modules_after_import("stitchcuda_lab")
    heavy = [m for m in loaded if m.split(".")[0] in ("torch", "IPython", "ipywidgets",
                                                       "plotly", "anthropic")]
    assert not heavy, heavy[:5]


def _jupyter_imports(path: Path, text: str | None = None) -> list[int]:
    """Lines in ``path`` that import stitchcuda_lab.jupyter, outside the extension hooks."""
    tree = ast.parse(path.read_text() if text is None else text, filename=str(path))
    allowed: set[int] = set()
    if path == PKG / "__init__.py":
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name in ("load_ipython_extension",
                                                               "unload_ipython_extension"):
                allowed |= {n.lineno for n in ast.walk(fn) if hasattr(n, "lineno")}
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = ".".join(rel.parts[:-1])     # for __init__.py that is the package itself
    hits = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            names = [a.value for a in node.args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str)]
        if any(n == "stitchcuda_lab.jupyter" or n.startswith("stitchcuda_lab.jupyter.")
               for n in names) and node.lineno not in allowed:
            hits.append(node.lineno)
    return hits


def test_nothing_outside_the_notebook_layer_imports_it():
    offenders = {}
    for path in PKG.rglob("*.py"):
        if "jupyter" in path.relative_to(PKG).parts:
            continue
        hits = _jupyter_imports(path)
        if hits:
            offenders[str(path.relative_to(PKG))] = hits
    assert not offenders, offenders


def test_the_jupyter_import_check_can_fail():
    where = PKG / "agents" / "probe.py"          # never written: the text is passed in
    assert _jupyter_imports(where, "import os\nfrom ..jupyter import panel\n") == [2]
    assert _jupyter_imports(where, "def f():\n    import stitchcuda_lab.jupyter.magics\n") == [2]
    assert _jupyter_imports(where, "from ..plan import Plan\n") == []


def test_the_public_api_is_exactly_the_lazy_all():
    import stitchcuda_lab as sl
    assert set(sl.__all__) == set(sl._LAZY) | {"load_ipython_extension", "__version__"}
    assert sl.__all__ == sorted(sl.__all__)
    for name in sl.__all__:
        assert getattr(sl, name) is not None, name
    import types
    public = {n for n, v in vars(sl).items() if not n.startswith("_")
              and not isinstance(v, types.ModuleType)} - {"annotations", "Any"}
    assert public <= set(sl.__all__) | {"unload_ipython_extension"}
    with pytest.raises(AttributeError):
        sl.not_a_thing  # noqa: B018


def test_lazy_names_come_from_the_modules_they_name():
    import stitchcuda_lab as sl
    for name, module in sl._LAZY.items():
        assert getattr(sl, name) is getattr(importlib.import_module(module), name)


def test_the_import_check_sees_what_a_torch_import_pulls_in():
    assert "torch.cuda" in _modules_after_import("torch")


# -- function size ------------------------------------------------------------------------------
MAX_FUNCTION_LINES = 120   # def line to last line
# Functions still longer, each with who owns splitting it: the list only shrinks.
LONG_FUNCTIONS = {
    "toolchain/verify.py::_verify": "being split in the Verifier redesign",
}


def _function_lengths(path: Path) -> dict[str, int]:
    """``{qualified name: lines}`` of every function and method in ``path``, nested ones too."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            else:
                visit(child, prefix)
    visit(ast.parse(path.read_text(), filename=str(path)), "")
    return out


def _long_functions() -> dict[str, int]:
    return {f"{path.relative_to(PKG).as_posix()}::{name}": n
            for path in sorted(PKG.rglob("*.py"))
            for name, n in _function_lengths(path).items() if n > MAX_FUNCTION_LINES}


def test_no_function_is_longer_than_120_lines():
    long = {k: n for k, n in _long_functions().items() if k not in LONG_FUNCTIONS}
    assert not long, f"split these (def line to last line > {MAX_FUNCTION_LINES}): {long}"


def test_the_long_function_allow_list_has_no_stale_entries():
    stale = sorted(set(LONG_FUNCTIONS) - set(_long_functions()))
    assert not stale, f"these are short now (or moved): drop them from LONG_FUNCTIONS: {stale}"


def test_the_function_length_check_sees_nested_functions_and_methods(tmp_path):
    body = "\n".join(f"            x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    src = tmp_path / "probe.py"
    src.write_text(f"class C:\n    def m(self):\n        def inner():\n{body}\n")
    lengths = _function_lengths(src)
    assert lengths["C.m.inner"] == MAX_FUNCTION_LINES + 1 and lengths["C.m"] > lengths["C.m.inner"]
