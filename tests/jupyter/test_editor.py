"""The kernel editor: the shipped CodeMirror bundle, its widget, the textarea fallback, and
compiler messages mapped onto the lines the person edits."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stitchcuda_lab.jupyter import diagnostics, editor

ROOT = Path(__file__).resolve().parents[2]
WIDGETS = ROOT / "widgets"

C_BROKEN = "int f(int x) {\n    int y = x\n    return y;\n}\n"


def test_the_bundle_is_one_es_module_with_a_render_and_no_network_imports():
    text = editor.BUNDLE.read_text()
    assert editor.BUNDLE.stat().st_size > 100_000           # CodeMirror is inside, not fetched
    assert "export{" in text.replace(" ", "") and "render" in text
    for needle in ('from"http', "from'http", 'import("http', "import('http", "esm.sh",
                   "cdn.jsdelivr", "unpkg.com"):
        assert needle not in text.replace(" ", "")


@pytest.mark.skipif(shutil.which("node") is None or not (WIDGETS / "node_modules").is_dir(),
                    reason="node and widgets/node_modules are needed to rebuild the bundle "
                           "(npm ci in widgets/)")
def test_the_committed_bundle_is_what_the_build_script_makes():
    r = subprocess.run(["node", "build.mjs", "--check"], cwd=WIDGETS, capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_wheel_ships_the_bundle(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(tmp_path.glob("stitchcuda_lab-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "stitchcuda_lab/jupyter/static/editor.js" in names


def test_codemirror_editor_carries_code_diff_base_and_diagnostics():
    assert editor.available()
    ed = editor.make_editor("int a;", lang="cuda", original="int b;",
                            diagnostics=[{"line": 1, "col": 5, "severity": "error",
                                          "message": "boom"}])
    assert editor.is_codemirror(ed)
    assert (ed.value, ed.lang, ed.original, ed.show_diff) == ("int a;", "cuda", "int b;", True)
    assert ed.diagnostics[0]["line"] == 1
    assert ed._esm == editor.BUNDLE or "render" in str(ed._esm)
    state = ed.get_state()
    assert state["value"] == "int a;" and state["diagnostics"][0]["message"] == "boom"


def test_textarea_fallback_has_the_same_value():
    ed = editor.make_editor("int a;", kind="textarea")
    assert not editor.is_codemirror(ed) and ed.value == "int a;"
    ed.value = "int b;"
    assert ed.value == "int b;"


def test_unknown_editor_kind_is_a_usage_error():
    from stitchcuda_lab.errors import UsageError
    with pytest.raises(UsageError, match="not an editor kind"):
        editor.make_editor("", kind="vim")


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="needs a C compiler")
def test_gcc_messages_land_on_the_kernel_line(tmp_path):
    src = tmp_path / "k0_t1.c"
    src.write_text(C_BROKEN)
    cc = shutil.which("cc") or shutil.which("gcc")
    log = subprocess.run([cc, "-c", src.name, "-o", "/dev/null"], cwd=tmp_path,
                         capture_output=True, text=True, check=False).stderr
    found = diagnostics.parse(log, ["k0_t1"])
    assert found and found[0].kernel == "k0_t1" and found[0].severity == "error"
    assert C_BROKEN.splitlines()[found[0].line - 1].strip() == "return y;"
    assert found[0].col == 5


def test_nvrtc_messages_land_on_the_kernel_line():
    log = ('k1_t2.cu(12): error: identifier "blockDimx" is undefined\n'
           'k1_t2.cu(3): warning #177-D: variable "unused" was declared but never referenced\n'
           "1 error detected in the compilation of \"k1_t2.cu\".")
    found = diagnostics.parse(log, ["k0_t1", "k1_t2"])
    assert [(d.kernel, d.line, d.severity) for d in found] == [("k1_t2", 12, "error"),
                                                                ("k1_t2", 3, "warning")]
    assert found[0].message == 'identifier "blockDimx" is undefined'


def test_a_prelude_in_front_of_the_kernel_is_subtracted_and_lines_are_clipped():
    log = "k0.c:130:1: error: expected declaration or statement at end of input"
    assert diagnostics.parse(log, ["k0"], offsets={"k0": 10})[0].line == 120
    assert diagnostics.parse(log, ["k0"], lines={"k0": 124})[0].line == 124
    assert diagnostics.parse("k0.c:5:1: error: x", ["k0"], offsets={"k0": 10}) == []


def test_messages_about_other_files_are_not_put_on_a_kernel():
    log = "/usr/include/math.h:3:1: error: nope\nmodel.py:12: SyntaxWarning: x"
    assert diagnostics.parse(log, ["k0_t1"]) == []
