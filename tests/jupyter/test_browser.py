"""A real browser: JupyterLab + headless Chromium run the quickstart and click the panel.

Chromium comes from apt-get (installed here when missing), Playwright from pip; Playwright
cannot download its own browser on these machines, so it drives /usr/bin/chromium. The
screenshot lands in test-artifacts/ (gitignored).
"""

from __future__ import annotations

import contextlib
import json
import os
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


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("chromium is missing and apt-get cannot install it here (needs apt and root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                       check=False, capture_output=True, text=True, timeout=600,
                       env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], check=False, capture_output=True, timeout=300,
                       env=env)
        r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                           check=False, capture_output=True, text=True, timeout=600,
                       env=env)
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


def _quickstart_for_clicking(root: Path) -> str:
    """The quickstart with drive=False, so nothing is approved unless the browser clicks."""
    import nbformat
    nb = nbformat.read(ROOT / "notebooks" / "01_quickstart.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert "drive = True" in params.source
    params.source = (params.source.replace("drive = True", "drive = False")
                     .replace('sessions_dir = "stitch_sessions"',
                              f'sessions_dir = {str(root / "sessions")!r}'))
    nbformat.write(nb, root / "quickstart.ipynb")
    return "quickstart.ipynb"


@dataclass
class Lab:
    url: str      # the notebook, opened in the browser
    base: str
    token: str

    def kernel_ready(self, timeout: float = 120) -> None:
        """Wait until the notebook's kernel is idle with the browser connected to it (a Run
        All sent before that runs nothing)."""
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


@pytest.fixture
def jupyterlab(tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    name = _quickstart_for_clicking(root)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "STITCH_CACHE_DIR": str(tmp_path / "cache"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter_config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter_runtime")}
    env.pop("ANTHROPIC_API_KEY", None)
    with open(tmp_path / "jupyterlab.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
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
                    tail = (tmp_path / "jupyterlab.log").read_text()[-2000:]
                    pytest.fail(f"JupyterLab exited:\n{tail}")
                try:
                    with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start within 90 s")
                time.sleep(0.5)
            yield Lab(url=f"{base}/lab/tree/{name}?token={token}", base=base, token=token)
        finally:
            with contextlib.suppress(OSError):   # the server's log, for a failed run's report
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(tmp_path / "jupyterlab.log", ARTIFACTS / "browser_jupyterlab.log")
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)


APPROVE_ENABLED = ("() => { const b = [...document.querySelectorAll('.stitch-panel button')]"
                   ".find(b => b.textContent.includes('Approve plan')); return b && !b.disabled; }")


RAN = ("() => [...document.querySelectorAll('.jp-InputPrompt')]"
       ".some(p => /\\[\\d+\\]/.test(p.textContent))")


def _accept_dialogs(page) -> None:
    """Accept a modal (e.g. "Select Kernel" after a kernel restart) so clicks reach the page."""
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    while dialog.count():
        dialog.first.click()
        page.wait_for_timeout(500)


def _run_all_until_the_panel_waits(page, attempts: int = 3) -> None:
    """Run > Run All Cells until the %%stitch panel offers "Approve plan". A click that lands
    before the kernel connection is ready runs nothing, and a kernel that dies on a loaded
    machine comes back through a dialog: both are retried, each within a bounded time."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    for _ in range(attempts):
        _accept_dialogs(page)
        page.click(".lm-MenuBar-item:has-text('Run')")
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            # a click that ran nothing shows soon: the first (trivial) cell never runs
            page.wait_for_function(RAN, timeout=60_000)
            page.wait_for_function(APPROVE_ENABLED, timeout=180_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    pytest.fail("JupyterLab never showed the panel's Approve plan (see browser_jupyterlab.log)")


def test_quickstart_in_jupyterlab_click_approve_and_next(jupyterlab):
    chromium = _chromium()
    sync_playwright = _playwright()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "browser_quickstart.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.set_default_timeout(60_000)
            page.goto(jupyterlab.url, wait_until="domcontentloaded")
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            # the kernel is up when the status says Idle
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                                   timeout=120_000)
            jupyterlab.kernel_ready()
            page.wait_for_timeout(1000)
            _run_all_until_the_panel_waits(page)

            panel = page.locator(".stitch-panel").first
            approve = panel.locator("button:has-text('Approve plan')")
            panel.screenshot(path=str(ARTIFACTS / "browser_plan.png"))
            approve.click()

            panel.locator(".lm-TabBar-tab:has-text('Kernels')").click()
            panel.locator(".stitch-code textarea").first.wait_for(state="visible")
            panel.screenshot(path=str(ARTIFACTS / "browser_kernels.png"))
            panel.locator(".lm-TabBar-tab:has-text('History')").click()
            nxt = panel.locator("button:has-text('Run next iteration')")
            page.wait_for_function(
                "() => { const b = [...document.querySelectorAll('.stitch-panel button')]"
                ".find(b => b.textContent.includes('Run next iteration'));"
                " return b && !b.disabled; }", timeout=240_000)
            nxt.click()

            panel.locator(".lm-TabBar-tab:has-text('Profile')").click()
            verdict = panel.locator(".stitch-verdict")
            verdict.wait_for(state="visible", timeout=240_000)
            text = verdict.inner_text()
            assert "pass" in text and "vs eager" in text, text
            plot = panel.locator(".js-plotly-plot").first
            plot.wait_for(state="visible", timeout=60_000)
            assert "reference" in plot.inner_text() and "time (µs)" in plot.inner_text()
            assert not panel.locator(".stitch-error").count()
            page.wait_for_timeout(500)
            panel.screenshot(path=str(shot))
            panel.locator(".lm-TabBar-tab:has-text('History')").click()
            panel.locator(".stitch-versions").wait_for(state="visible")
            page.wait_for_timeout(500)
            panel.screenshot(path=str(ARTIFACTS / "browser_history.png"))
        except BaseException:
            with contextlib.suppress(Exception):    # the screenshot is a diagnostic only
                page.screenshot(path=str(ARTIFACTS / "browser_quickstart_failure.png"),
                                full_page=True)
            raise
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
