"""A real browser: JupyterLab + headless Chromium walk the interactive path by clicking.

Approve the plan, edit a kernel in the CodeMirror editor, Approve the edit, read the verdict
and the timeline, break the kernel and see the compiler's message on its line, run the next
iteration (it refines the edit), restart the kernel and resume the session. Chromium comes
from apt-get (installed here when missing), Playwright from pip; Playwright cannot download
its own browser on these machines, so it drives /usr/bin/chromium. Screenshots of each stage
land in test-artifacts/ (gitignored), and a full-page one when a step fails.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-dev-shm-usage"]
EDIT = "/* checked in the browser */"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("chromium is missing and apt-get cannot install it here (needs apt and root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                       check=False, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], check=False, capture_output=True, timeout=300,
                       env=env)
        r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                           check=False, capture_output=True, text=True, timeout=600, env=env)
    path = shutil.which("chromium")
    if path is None:
        pytest.skip(f"apt-get could not install chromium: {r.stderr.strip()[-300:]}")
    return path


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "playwright"],
                           check=False, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.skip(f"pip could not install playwright: {r.stderr.strip()[-300:]}")
        from playwright.sync_api import sync_playwright
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MODEL = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = x * self.scale + self.bias
        y = torch.sigmoid(y) * y
        return torch.tanh(y)

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return [512, 1.7]'''


def _walk_notebook(root: Path) -> str:
    """Setup, the %%stitch cell, and the cell a person runs after a kernel restart."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
    setup = ("%load_ext stitchcuda_lab\n"
             f"%config StitchMagics.sessions_dir = {str(root / 'sessions')!r}\n"
             "%config StitchMagics.compile_modes = ''\n"
             "%config StitchMagics.timing_trials = 5\n"
             "%config StitchMagics.device = 'cpu'\n"
             "%config StitchMagics.profile = True")
    nb = new_notebook(cells=[
        new_code_cell(setup),
        new_code_cell("%%stitch --agent offline --iters 2 -o s --panel panel\n" + MODEL),
        new_markdown_cell("After a kernel restart: run the first cell, then this one."),
        new_code_cell("%stitch_open -o s --panel panel"),
    ], metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                "name": "python3"}})
    nbformat.write(nb, root / "walk.ipynb")
    return "walk.ipynb"


@dataclass
class Lab:
    url: str      # the notebook, opened in the browser
    base: str
    token: str

    def kernel_ready(self, timeout: float = 120) -> None:
        """Wait until the notebook's kernel is idle with the browser connected to it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base}/api/kernels?token={self.token}",
                                            timeout=5) as r:
                    kernels = json.load(r)
                if any(k.get("execution_state") == "idle" and k.get("connections", 0) >= 1
                       for k in kernels):
                    return
            except OSError:
                pass
            time.sleep(0.5)
        pytest.fail(f"the notebook's kernel was not ready within {timeout:.0f} s")


@contextlib.contextmanager
def _server(tmp_path: Path, app: str):
    """``jupyter lab`` or ``jupyter notebook`` (Notebook 7) on a free port, over walk.ipynb."""
    root = tmp_path / "lab"
    root.mkdir()
    name = _walk_notebook(root)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "STITCH_CACHE_DIR": str(tmp_path / "cache"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter_config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter_runtime"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    env.pop("ANTHROPIC_API_KEY", None)
    labconfig = tmp_path / "jupyter_config" / "labconfig"     # no news pop-up over the page
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    log_path = tmp_path / f"{app}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", app, "--no-browser", "--ip=127.0.0.1",
             f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
             "--ServerApp.port_retries=0", "--LabApp.news_url=",
             *(["--allow-root"] if os.geteuid() == 0 else []),
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter {app} exited:\n{log_path.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter {app} did not start within 90 s")
                time.sleep(0.5)
            page = f"lab/tree/{name}" if app == "lab" else f"notebooks/{name}"
            yield Lab(url=f"{base}/{page}?token={token}", base=base, token=token)
        finally:
            with contextlib.suppress(OSError):   # the server's log, for a failed run's report
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(log_path, ARTIFACTS / f"browser_{app}.log")
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)


@pytest.fixture
def jupyterlab(tmp_path):
    with _server(tmp_path, "lab") as lab:
        yield lab


@pytest.fixture
def notebook7(tmp_path):
    if importlib.util.find_spec("notebook") is None:
        pytest.skip("Notebook 7 is not installed (pip install 'stitchcuda-lab[dev]')")
    with _server(tmp_path, "notebook") as lab:
        yield lab


class Walk:
    """What a person does in the page, one helper per gesture."""

    def __init__(self, page):
        self.page = page

    @property
    def panel(self):
        return self.page.locator(".stitch-panel").last

    def shot(self, name: str) -> None:
        self.page.wait_for_timeout(400)
        self.panel.screenshot(path=str(ARTIFACTS / f"browser_{name}.png"))

    def idle(self, timeout: float = 240_000) -> None:
        self.page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                                    timeout=timeout)

    def run_cell(self, index: int) -> None:
        """Click into code cell ``index`` and press Shift+Enter, as a person runs one cell."""
        cell = self.page.locator(".jp-Notebook .jp-Cell").nth(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")
        self.page.wait_for_timeout(300)

    def tab(self, title: str) -> None:
        self.panel.locator(f".lm-TabBar-tab:has-text('{title}')").click()

    def button(self, label: str):
        return self.panel.locator("button", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))

    def click_when_enabled(self, label: str, timeout: float = 240_000) -> None:
        from playwright.sync_api import expect
        b = self.button(label).first
        expect(b).to_be_enabled(timeout=timeout)
        b.click()

    def wait_text(self, selector: str, pattern: str, timeout: float = 240_000) -> str:
        from playwright.sync_api import expect
        loc = self.panel.locator(selector).first
        expect(loc).to_contain_text(re.compile(pattern), timeout=timeout)
        return loc.inner_text()

    def editor_line(self, text: str):
        """The CodeMirror line of the first kernel editor that contains ``text``."""
        return self.panel.locator(".stitch-kernel-editor .cm-line", has_text=text).first

    def type_at_end_of(self, text: str, typed: str) -> None:
        line = self.editor_line(text)
        line.scroll_into_view_if_needed()
        line.click()
        self.page.keyboard.press("End")
        self.page.keyboard.type(typed)


def test_the_interactive_path_in_jupyterlab(jupyterlab):
    from playwright.sync_api import expect
    chromium = _chromium()
    sync_playwright = _playwright()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.set_default_timeout(60_000)
            w = Walk(page)
            page.goto(jupyterlab.url, wait_until="domcontentloaded")
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            w.idle(120_000)
            jupyterlab.kernel_ready()
            page.wait_for_timeout(1000)

            # the setup cell and the %%stitch cell, one at a time
            w.run_cell(0)
            w.idle()
            w.run_cell(1)
            expect(w.button("Approve plan").first).to_be_enabled(timeout=240_000)
            assert "Approve plan" in w.panel.locator(".stitch-next").inner_text()
            w.shot("plan")
            w.button("Approve plan").click()

            # the Kernels tab: a CodeMirror editor with line numbers, no spellcheck
            w.tab("Kernels")
            content = w.panel.locator(".stitch-kernel-editor .cm-content").first
            content.wait_for(state="visible", timeout=240_000)
            assert content.get_attribute("spellcheck") == "false"
            assert w.panel.locator(".stitch-kernel-editor .cm-lineNumbers").first.is_visible()
            assert w.panel.locator(".stitch-kernel-editor .tok-keyword, .stitch-kernel-editor [class*='ͼ']"
                                   ).count() > 0            # highlighted tokens
            w.shot("kernels")

            # edit a line, the button becomes Approve edit, and the edit is what is verified
            w.type_at_end_of("out2[", "  " + EDIT)
            w.click_when_enabled("Approve edit", timeout=30_000)
            w.wait_text(".widget-dropdown select", r"user\s\(edit\sof", timeout=240_000)  # nbsp
            expect(w.editor_line(EDIT)).to_be_visible(timeout=240_000)
            w.tab("Profile")
            verdict = w.wait_text(".stitch-verdict", r"\bpass\b")
            assert "vs eager" in verdict and verdict.split().count("pass") == 1, verdict
            plot = w.panel.locator(".js-plotly-plot").first
            plot.wait_for(state="visible", timeout=60_000)
            plot_text = plot.inner_text()
            assert "timed median" in plot_text and "reference" in plot_text, plot_text[:300]
            assert w.panel.locator(".stitch-kernel-table").first.inner_text().count("k0_t1") >= 1
            assert not w.panel.locator(".stitch-error").count()
            w.shot("profile")

            # break the edit: the compiler's message is marked on the line it names
            w.tab("Kernels")
            line = w.editor_line(EDIT)
            line.click()
            page.keyboard.press("End")
            for _ in range(len(EDIT) + 2):
                page.keyboard.press("Backspace")      # the comment, the spaces and the ';'
            page.keyboard.press("Backspace")
            w.click_when_enabled("Approve edit", timeout=30_000)
            w.wait_text(".widget-dropdown select", "build_error", timeout=240_000)
            marker = w.panel.locator(".stitch-kernel-editor .cm-lint-marker-error").first
            marker.wait_for(state="visible", timeout=60_000)
            listed = w.panel.locator(".stitch-diagnostics").first.inner_text()
            said = int(re.search(r"line (\d+)", listed).group(1))
            gutter = w.panel.locator(".stitch-kernel-editor .cm-lineNumbers .cm-gutterElement")
            numbers = [t.strip() for t in gutter.all_inner_texts()]
            assert str(said) in numbers, (said, numbers[:5])
            w.shot("compile_error")

            # the next iteration refines the passing edit and keeps it
            w.tab("History")
            w.click_when_enabled("Run next iteration")
            w.wait_text(".stitch-versions", "on your edit", timeout=300_000)
            expect(w.button("Stop and export").first).to_be_enabled(timeout=300_000)  # done
            assert "pass" in w.panel.locator(".stitch-versions").inner_text()
            w.shot("history")

            # restart the kernel; the setup cell and %stitch_open bring the session back
            page.click(".lm-MenuBar-item:has-text('Kernel')")
            page.get_by_role("menuitem", name=re.compile(r"^Restart Kernel")).first.click()
            page.locator(".jp-Dialog .jp-mod-accept").click()
            page.wait_for_timeout(2000)
            w.idle(120_000)
            # the panel of before says it lost its kernel, and its buttons take no clicks
            old = page.locator(".jp-Cell").nth(1).locator(".stitch-panel")
            expect(old).to_have_class(re.compile("jupyter-widgets-disconnected"),
                                      timeout=60_000)
            banner = old.evaluate("e => getComputedStyle(e, '::after').content")
            assert "lost its kernel" in banner and "%stitch_open" in banner, banner
            assert old.locator("button").first.evaluate(
                "b => getComputedStyle(b).pointerEvents") == "none"
            old.screenshot(path=str(ARTIFACTS / "browser_disconnected.png"))
            w.run_cell(0)
            w.idle()
            w.run_cell(3)
            w.idle()
            resumed = page.locator(".jp-Cell").nth(3).locator(".stitch-panel")
            resumed.wait_for(state="visible", timeout=120_000)
            resumed.locator(".lm-TabBar-tab:has-text('History')").click()
            versions = resumed.locator(".stitch-versions").inner_text()
            assert "your edit" in versions and "on your edit" in versions, versions
            resumed.screenshot(path=str(ARTIFACTS / "browser_resumed.png"))
        except BaseException:
            with contextlib.suppress(Exception):    # the screenshot is a diagnostic only
                page.screenshot(path=str(ARTIFACTS / "browser_failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert (ARTIFACTS / "browser_resumed.png").stat().st_size > 10_000


def test_the_editor_and_approve_edit_in_notebook_7(notebook7):
    from playwright.sync_api import expect
    chromium = _chromium()
    sync_playwright = _playwright()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.set_default_timeout(60_000)
            w = Walk(page)
            page.goto(notebook7.url, wait_until="domcontentloaded")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            notebook7.kernel_ready()
            page.wait_for_timeout(1000)
            w.run_cell(0)
            page.wait_for_timeout(2000)
            w.run_cell(1)
            w.click_when_enabled("Approve plan")
            w.tab("Kernels")
            content = w.panel.locator(".stitch-kernel-editor .cm-content").first
            content.wait_for(state="visible", timeout=240_000)
            assert content.get_attribute("spellcheck") == "false"
            w.type_at_end_of("out2[", "  " + EDIT)
            w.click_when_enabled("Approve edit", timeout=30_000)
            w.wait_text(".widget-dropdown select", r"user\s\(edit\sof", timeout=240_000)
            expect(w.editor_line(EDIT)).to_be_visible(timeout=60_000)
            w.tab("Profile")
            assert "pass" in w.wait_text(".stitch-verdict", r"\bpass\b")
            w.shot("notebook7")
        except BaseException:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / "browser_notebook7_failure.png"),
                                full_page=True)
            raise
        finally:
            browser.close()
