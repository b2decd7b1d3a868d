"""%%stitch with the real Session, offline agents and Verifier on the CPU (no fakes)."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from .conftest import SOURCE

pytestmark = pytest.mark.e2e


@pytest.fixture
def shell(settings):
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "stitchcuda_lab")
    for name, value in (("sessions_dir", settings.sessions_dir),
                        ("cache_dir", settings.cache_dir), ("compile_modes", ""),
                        ("timing_trials", 5), ("device", "cpu")):
        ip.run_line_magic("config", f"StitchMagics.{name} = {value!r}")
    yield ip
    magics = ip.magics_manager.registry["StitchMagics"]
    for s in magics.sessions.values():
        s.close()
    magics.sessions.clear()
    ip.run_line_magic("unload_ext", "stitchcuda_lab")
    for name in ("s", "Model", "get_inputs", "get_init_inputs"):
        ip.user_ns.pop(name, None)


def test_stitch_then_approve_twice_gives_a_verified_faster_program(shell, tmp_path, capsys):
    shell.run_cell_magic("stitch", "--agent offline --iters 0 -o s", SOURCE)
    s = shell.user_ns["s"]
    assert s.state.phase == "planned" and s.state.plan.tasks
    shell.run_line_magic("stitch_approve", "")
    shell.run_line_magic("stitch_approve", "")
    best = s.best()
    assert best is not None, s.state.verdicts
    _, verdict = best
    assert verdict.status == "pass" and verdict.correct
    panel = shell.magics_manager.registry["StitchMagics"].panels[s.id]
    assert "pass" in panel.verdict_html.value
    assert panel.figures["timeline"].layout.xaxis.type == "linear"

    import torch
    x = torch.randn(64, 32)
    assert torch.allclose(s.model()(x), torch.relu(x + 1.0), atol=1e-5)

    out = shell.run_line_magic("stitch_export", f"{s.id} {tmp_path / 'out'}")
    assert (out / "model_new.py").exists()

    listing = shell.run_line_magic("stitch_sessions", "")
    assert [r["id"] for r in listing] == [s.id]


def test_stitch_auto_runs_to_done_and_the_session_reopens(shell):
    shell.run_cell_magic("stitch", "--auto --iters 1 -o s", SOURCE)
    s = shell.user_ns["s"]
    assert s.state.phase == "done" and s.best() is not None
    sid = s.id
    s.close()
    magics = shell.magics_manager.registry["StitchMagics"]
    magics.sessions.clear()
    shell.run_line_magic("stitch_open", sid)
    assert magics.panels[sid].progress_label.value == "Opened: the session has finished"
    reopened = magics.sessions[sid]
    assert reopened.state.phase == "done" and reopened.best()[0].id == s.best()[0].id


def test_no_profiler_log_lines_reach_the_notebook(shell, capfd):
    shell.run_line_magic("config", "StitchMagics.profile = True")
    shell.run_cell_magic("stitch", "--iters 0 -o s", SOURCE)
    err = capfd.readouterr().err
    assert "USDT" not in err and "profiler_start" not in err, err[-500:]


def test_after_a_restart_stitch_open_resumes_the_newest_session(shell):
    shell.run_cell_magic("stitch", "--agent offline --iters 0 -o s", SOURCE)
    shell.run_line_magic("stitch_approve", "")                  # plan approved, candidate waits
    s = shell.user_ns.pop("s")
    sid, pending = s.id, list(s.state.pending)
    magics = shell.magics_manager.registry["StitchMagics"]
    s.close()                       # what a kernel restart does: the lock goes, the folder stays
    magics.sessions.clear()
    magics.panels.clear()
    shell.run_line_magic("stitch_open", "-o s --panel p")
    s2, p = shell.user_ns["s"], shell.user_ns.pop("p")
    assert s2 is not s and s2.id == sid and s2.state.pending == pending
    assert "Approve" in p.next_step.value
    assert p.progress.layout.visibility == "visible" and p.progress.value == 100
    assert p.progress_label.value == ("Opened where it stopped: coded; the kernel waits for your "
                                      "approval in Kernels"), p.progress_label.value
    shell.run_line_magic("stitch_approve", "")                  # carries on where it stopped
    assert s2.best() is not None


def test_a_verified_hand_edit_is_what_the_next_iteration_refines(shell):
    shell.run_cell_magic("stitch", "--agent offline --iters 2 -o s --panel p", SOURCE)
    s, p = shell.user_ns["s"], shell.user_ns.pop("p")
    p.threaded = False
    p.plan_approve.click()
    p.kernel_approve.click()
    first = p.selected()
    k = first.kernels[0]
    line = next(ln for ln in k.code.splitlines() if "=" in ln and "v" in ln and "[" not in ln)
    p.edit_kernel(k.name, k.code.replace(line, line + "  /* checked by hand */"))
    p.kernel_approve.click()
    mine = p.selected()
    assert s.state.verdicts[mine.id].status == "pass", s.state.verdicts[mine.id].summary()
    p.next_button.click()
    assert not p.error, p.error
    round1 = [c for c in s.state.candidates.values() if c.iteration == 1]
    assert round1 and all(c.parent == mine.id for c in round1)
    assert all("/* checked by hand */" in c.kernels[0].code for c in round1)
    assert all(s.state.verdicts[c.id].status == "pass" for c in round1)
