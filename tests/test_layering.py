"""Dependency direction: the pure core imports no GPU, notebook or LLM libraries; nothing
imports the notebook layer; the package's public API is exactly its lazy ``__all__``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "stitchcuda_lab"
FORBIDDEN = ("torch.cuda", "IPython", "ipywidgets", "plotly", "anthropic")
# Leaves: import nothing of the package (and no torch), so every module may use them.
LEAVES = ["stitchcuda_lab.aten", "stitchcuda_lab.agents.offline.helpers"]
PURE = ["stitchcuda_lab.plan", "stitchcuda_lab.candidate", "stitchcuda_lab.verdict",
        "stitchcuda_lab.record", "stitchcuda_lab.loop", "stitchcuda_lab.trace",
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


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path, text: str | None = None) -> list[tuple[int, list[str]]]:
    """(line, names) for every import in ``path``: module level, in functions, under
    TYPE_CHECKING and through ``importlib.import_module``; relative names made absolute."""
    tree = ast.parse(path.read_text() if text is None else text, filename=str(path))
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = ".".join(rel.parts[:-1])     # for __init__.py that is the package itself
    found = []
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
        if names:
            found.append((node.lineno, names))
    return found


def _jupyter_imports(path: Path, text: str | None = None) -> list[int]:
    """Lines in ``path`` that import stitchcuda_lab.jupyter, outside the extension hooks."""
    allowed: set[int] = set()
    if path == PKG / "__init__.py":
        tree = ast.parse(path.read_text() if text is None else text)
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name in ("load_ipython_extension",
                                                               "unload_ipython_extension"):
                allowed |= {n.lineno for n in ast.walk(fn) if hasattr(n, "lineno")}
    return [line for line, names in _imports(path, text)
            if any(n == "stitchcuda_lab.jupyter" or n.startswith("stitchcuda_lab.jupyter.")
                   for n in names) and line not in allowed]


def _import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (any import, anywhere in the file)."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for _, names in _imports(path):
            deps |= {n for n in names if n in modules and n != name}
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_anywhere_in_the_package():
    # a package's __init__ importing its own submodules is how a package exposes its API
    graph = {m: {d for d in deps if not m.startswith(d + ".")}
             for m, deps in _import_graph().items()}
    assert _cycles(graph) == []


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_what_programs_import_never_imports_the_verifier():
    graph = _import_graph()
    runtime = [m for m in graph if m == "stitchcuda_lab.runtime"
               or m.startswith("stitchcuda_lab.runtime.")]
    assert runtime
    bad = {m: sorted(d for d in graph[m] if d.startswith("stitchcuda_lab.verifier"))
           for m in runtime}
    assert not any(bad.values()), bad


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


# ---------------------------------------------------------------- the environment

STITCH_NAME = re.compile(r"STITCH_[A-Z0-9_]*")
# verifier/worker.py hands the judge its cache folder and memory cap (STITCH_CACHE_DIR,
# STITCH_CACHE, STITCH_WORKER_MEMORY): the judge's runtime reads them through Settings.from_env.
NAMES_STITCH_VARIABLES = {"settings.py", "verifier/worker.py"}
# Modules that read os.environ for variables that are not knobs: toolchains (CC, CUDA_HOME),
# a child's environment, Ray's address, whether an API key is present (never its value).
READS_ENVIRON = {"settings.py", "runtime/build.py", "bench.py", "doctor.py",
                 "verifier/worker.py", "verifier/pool.py", "verifier/ncu.py",
                 "verifier/zygote.py"}


def _stitch_names(path: Path, text: str | None = None) -> list[int]:
    """Lines of string constants that are a STITCH_* variable's name or start one
    (``"STITCH_" + name``, ``f"STITCH_{name}"``): what reading or setting one takes."""
    tree = ast.parse(path.read_text() if text is None else text)
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str) and STITCH_NAME.fullmatch(n.value)})


def _environ_reads(path: Path, text: str | None = None) -> list[int]:
    """Lines that touch ``os.environ`` or call ``getenv``."""
    tree = ast.parse(path.read_text() if text is None else text)
    return sorted({n.lineno for n in ast.walk(tree)
                   if (isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv"))
                   or (isinstance(n, ast.Name) and n.id in ("environ", "getenv"))})


def _package_files() -> dict[str, Path]:
    return {str(p.relative_to(PKG)): p for p in PKG.rglob("*.py")}


def test_only_settings_names_stitch_variables():
    offenders = {rel: lines for rel, p in _package_files().items()
                 if rel not in NAMES_STITCH_VARIABLES and (lines := _stitch_names(p))}
    assert not offenders, offenders


def test_the_stitch_variable_check_can_fail():
    where = PKG / "probe.py"                     # never written: the text is passed in
    assert _stitch_names(where, 'import os\nx = os.environ.get("STITCH_CACHE")\n') == [2]
    assert _stitch_names(where, 'key = f"STITCH_{name.upper()}"\n') == [1]
    assert _stitch_names(where, 'hint = "set STITCH_MODEL to a served model"\n') == []


def test_the_environment_is_read_only_where_it_is_listed():
    offenders = {rel: lines for rel, p in _package_files().items()
                 if rel not in READS_ENVIRON and (lines := _environ_reads(p))}
    assert not offenders, offenders
    assert _environ_reads(PKG / "probe.py", "import os\nos.environ.get('X')\n") == [2]
    assert _environ_reads(PKG / "probe.py", "from os import getenv\ngetenv('X')\n") == [2]


def test_every_stitch_variable_a_message_or_a_doc_names_is_a_setting():
    import dataclasses

    from stitchcuda_lab.settings import Settings, env_name
    # the worker's own hand-over to its child (see NAMES_STITCH_VARIABLES)
    known = {env_name(f.name) for f in dataclasses.fields(Settings)} | {"STITCH_WORKER_MEMORY"}
    docs = [*PKG.rglob("*.py"), *PKG.rglob("*.md"), *(PKG.parent / "docs").glob("*.md"),
            PKG.parent / "README.md"]
    named = {}
    for path in docs:
        if path.exists():
            for name in re.findall(r"STITCH_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text()):
                named.setdefault(name, str(path.relative_to(PKG.parent)))
    assert {n: where for n, where in named.items() if n not in known} == {}


def _own_import_guards(path: Path, text: str | None = None) -> list[int]:
    """Lines of ``try`` blocks that catch ImportError around an import of the package itself
    (a relative import, ``stitchcuda_lab...``, ``import_module("stitchcuda_lab...")``)."""
    tree = ast.parse(path.read_text() if text is None else text)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = {n.id for h in node.handlers if h.type is not None for n in ast.walk(h.type)
                  if isinstance(n, ast.Name)}
        if not caught & {"ImportError", "ModuleNotFoundError"}:
            continue
        body = ast.Module(body=node.body, type_ignores=[])
        own = [n for n in ast.walk(body)
               if (isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith(
                   "stitchcuda_lab")))
               or (isinstance(n, ast.Import) and any(a.name.startswith("stitchcuda_lab")
                                                     for a in n.names))
               or (isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "import_module")]
        if own:
            lines.append(node.lineno)
    return lines


def test_no_module_guards_the_packages_own_modules_with_except_import_error():
    offenders = {rel: lines for rel, p in _package_files().items()
                 if (lines := _own_import_guards(p))}
    assert not offenders, offenders


def test_the_import_guard_check_can_fail():
    where = PKG / "probe.py"
    assert _own_import_guards(where, "try:\n    from .graph import analyse\n"
                                     "except ImportError:\n    pass\n") == [1]
    assert _own_import_guards(where, "try:\n    import torch\nexcept ImportError:\n"
                                     "    torch = None\n") == []


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
# Functions still longer, each with who owns splitting it: the list only shrinks (now empty).
LONG_FUNCTIONS: dict[str, str] = {}


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
