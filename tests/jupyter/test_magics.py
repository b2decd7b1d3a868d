"""The %%stitch magics driven through InteractiveShell, with no kernel or browser."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from stitchcuda_lab.jupyter.panel import SessionPanel
from stitchcuda_lab.session import Session

from .conftest import SOURCE
from .fakes import FakeSession


@pytest.fixture
def shell(settings, monkeypatch):
    import stitchcuda_lab.session
    monkeypatch.setattr(stitchcuda_lab.session, "Session", FakeSession)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "stitchcuda_lab")
    magics = ip.magics_manager.registry["StitchMagics"]
    # the test's isolated roots, through %config like a person would
    ip.run_line_magic("config", f"StitchMagics.sessions_dir = {settings.sessions_dir!r}")
    ip.run_line_magic("config", f"StitchMagics.cache_dir = {settings.cache_dir!r}")
    ip.run_line_magic("config", "StitchMagics.compile_modes = ''")
    yield ip
    ip.run_line_magic("unload_ext", "stitchcuda_lab")
    magics.sessions.clear()
    for name in ("s", "Model", "get_inputs", "get_init_inputs", "Net"):
        ip.user_ns.pop(name, None)


def _magics(ip):
    return ip.magics_manager.registry["StitchMagics"]


def test_load_ext_registers_cell_and_line_magics(shell):
    m = shell.magics_manager.magics
    assert "stitch" in m["cell"]
    assert {"stitch_sessions", "stitch_open", "stitch_approve", "stitch_export",
            "stitch_stop"} <= set(m["line"])


def test_config_values_reach_the_settings(shell):
    shell.run_line_magic("config", "StitchMagics.iters = 2")
    shell.run_line_magic("config", "StitchMagics.device = 'cpu'")
    shell.run_line_magic("config", "StitchMagics.tensor_cores = False")
    s = _magics(shell).settings()
    assert (s.iters, s.device, s.compile_modes, s.tensor_cores) == (2, "cpu", "", False)


def test_every_setting_is_a_config_trait_made_from_its_field(shell):
    import dataclasses

    from stitchcuda_lab.jupyter.magics import StitchMagics
    from stitchcuda_lab.settings import Settings
    traits = StitchMagics.class_traits(config=True)
    names = [f.name for f in dataclasses.fields(Settings)]
    assert set(names) <= set(traits)
    for name in names:
        assert traits[name].help == Settings.describe(name) and traits[name].default() is None
    shell.run_line_magic("config", "StitchMagics.rag_top_k = 2")
    shell.run_line_magic("config", "StitchMagics.atol = 0.001")
    s = _magics(shell).settings()
    assert (s.rag_top_k, s.atol, s.trials) == (2, 0.001, Settings().trials)


def test_options_override_config(shell):
    shell.run_line_magic("config", "StitchMagics.iters = 2")
    shell.run_cell_magic("stitch", "--iters 0 --agent offline -o s", SOURCE)
    s = shell.user_ns["s"]
    assert s.settings.iters == 0 and s.agent == "offline"


def test_stitch_stops_at_the_plan_and_shows_the_panel(shell):
    assert shell.run_cell_magic("stitch", "-o s", SOURCE) is None    # returns at once
    s = shell.user_ns["s"]
    assert s.state.phase == "planned"
    panel = _magics(shell).panels[s.id]
    assert isinstance(panel, SessionPanel) and panel.threaded
    assert not panel.plan_approve.disabled
    assert "Model" in shell.user_ns       # the cell's names are usable in the notebook


def test_stitch_auto_runs_the_whole_loop(shell):
    shell.run_cell_magic("stitch", "--auto --iters 1 -o s", SOURCE)
    s = shell.user_ns["s"]
    assert s.state.phase == "done"
    assert s.best() is not None and s.state.iteration == 1


def test_model_class_option_names_the_module(shell):
    cell = SOURCE.replace("class Model", "class Net")
    shell.run_cell_magic("stitch", "--model-class Net --name net -o s", cell)
    s = shell.user_ns["s"]
    assert s.problem.name == "net" and "Model = Net" in s.problem.source


@pytest.mark.parametrize("line, cell, message", [
    ("--frobnicate", SOURCE, "unrecognized arguments"),
    ("--agent gpt9", SOURCE, "invalid choice"),
    ("--device tpu", SOURCE, "is not a device"),
    ("", "x = 1\n", "defines no `Model` class"),
    ("", SOURCE.replace("class Model", "class Net"), "--model-class Net"),
    ("--model-class Missing", SOURCE, "defines no such class"),
    ("", SOURCE.replace("def get_inputs", "def inputs"), "no `get_inputs()`"),
    ("", "\n\n", "needs a cell|cell body is empty"),
])
def test_user_mistakes_raise_usage_error_with_a_clear_message(shell, line, cell, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        shell.run_cell_magic("stitch", line, cell)


def test_problem_errors_name_their_line_as_the_cell_counts_it(shell):
    # the body's 7th line is the cell's 8th: the %%stitch line is the cell's first
    bad = SOURCE.replace("return torch.relu(x + 1.0)", "return torch.relu(x +)")
    with pytest.raises(UsageError, match=r"<cell>:8: syntax error"):
        shell.run_cell_magic("stitch", "", bad)


def test_approve_and_stop_line_magics(shell):
    shell.run_cell_magic("stitch", "-o s", SOURCE)
    s = shell.user_ns["s"]
    shell.run_line_magic("stitch_approve", "")        # the plan
    assert s.state.phase == "coded"
    shell.run_line_magic("stitch_approve", s.id)      # the pending candidate
    assert s.state.phase == "verified" and s.best() is not None
    with pytest.raises(UsageError, match="nothing awaits approval"):
        shell.run_line_magic("stitch_approve", "")
    shell.run_line_magic("stitch_stop", s.id)
    assert s.state.phase == "stopped"
    panel = _magics(shell).panels[s.id]
    assert "stopped" in panel.status.value


def test_export_line_magic_writes_the_best_candidate(shell, tmp_path):
    shell.run_cell_magic("stitch", "--auto --iters 0 -o s", SOURCE)
    s = shell.user_ns["s"]
    out = shell.run_line_magic("stitch_export", f"{s.id} {tmp_path / 'out'}")
    assert (out / "model_new.py").exists()


def test_open_unknown_session_is_a_usage_error(shell):
    with pytest.raises(UsageError, match="no session 'nope'"):
        shell.run_line_magic("stitch_open", "nope")


def test_approve_without_a_session_says_what_to_do(shell):
    _magics(shell).last = None
    with pytest.raises(UsageError, match="run a %%stitch cell"):
        shell.run_line_magic("stitch_approve", "")


def test_sessions_lists_the_sessions_root(shell, settings):
    from stitchcuda_lab.store import SessionStore
    SessionStore(settings.sessions_dir).create({"problem": "cell", "device": "cpu",
                                                "agent": "offline"})
    listing = shell.run_line_magic("stitch_sessions", "")
    assert len(listing) == 1 and "cell" in repr(listing) and "<table>" in listing._repr_html_()


def test_a_configuration_mistake_during_the_first_step_is_a_usage_error(shell, monkeypatch):
    from stitchcuda_lab.errors import ConfigError

    def no_key(self, auto=False):
        raise ConfigError("ANTHROPIC_API_KEY is not set", hint="export ANTHROPIC_API_KEY=...")
    monkeypatch.setattr(FakeSession, "advance", no_key)
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY is not set"):
        shell.run_cell_magic("stitch", "-o s", SOURCE)
    panel = _magics(shell).panels[shell.user_ns["s"].id]
    assert "ANTHROPIC_API_KEY" in panel.error and "export" in panel.error


def test_auto_run_failure_fails_the_cell(shell, monkeypatch):
    from stitchcuda_lab.errors import WorkerError

    def dies(self, auto=False):
        raise WorkerError("the worker died")
    monkeypatch.setattr(FakeSession, "advance", dies)
    with pytest.raises(WorkerError):
        shell.run_cell_magic("stitch", "--auto", SOURCE)


@pytest.fixture
def real_session(shell, monkeypatch):
    """The real Session.create behind the magic (the entry sequence that validates and makes
    the agents); these tests stop before any session exists."""
    import stitchcuda_lab.session
    monkeypatch.setattr(stitchcuda_lab.session, "Session", Session)
    return shell


def test_a_forward_that_raises_is_a_usage_error_naming_its_line(real_session):
    shell = real_session
    bad = SOURCE.replace("return torch.relu(x + 1.0)", "return torch.relu(x @ torch.ones(3, 3))")
    # the cell's 8th line (the %%stitch line is its first), quoted under that number too
    with pytest.raises(UsageError, match=r"<cell>:8: .*Model.forward raised RuntimeError"
                                         r"(.|\n)*line 8 reads: return torch.relu\(x @"):
        shell.run_cell_magic("stitch", "", bad)


def test_an_llm_agent_without_its_key_is_a_usage_error_before_any_session(real_session,
                                                                          monkeypatch, settings):
    shell = real_session
    pytest.importorskip("anthropic")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        shell.run_cell_magic("stitch", "--agent claude", SOURCE)
    assert not _magics(shell).sessions


def test_o_and_panel_put_the_session_and_the_panel_in_variables(shell):
    shell.run_cell_magic("stitch", "--auto --iters 0 -o s --panel p", SOURCE)
    s, p = shell.user_ns["s"], shell.user_ns["p"]
    assert p is _magics(shell).panels[s.id] and p.session is s
    p.threaded = False
    p.model_button.click()
    msg = p.export_html.value
    assert "<code>p.model</code>" in msg and "<code>s.model()</code>" in msg
    assert "panel.model" not in msg
    shell.user_ns.pop("p", None)


def test_without_variables_the_messages_say_how_to_get_one(shell):
    shell.run_cell_magic("stitch", "--auto --iters 0", SOURCE)
    sid = _magics(shell).last
    p = _magics(shell).panels[sid]
    p.threaded = False
    p.model_button.click()
    assert f"%stitch_open {sid} -o s" in p.export_html.value


def test_a_bad_variable_name_is_a_usage_error(shell):
    with pytest.raises(UsageError, match="not a Python variable name"):
        shell.run_cell_magic("stitch", "-o 2s", SOURCE)


def test_approve_waits_for_a_step_the_panel_is_running(shell):
    shell.run_cell_magic("stitch", "-o s", SOURCE)
    s = shell.user_ns["s"]
    panel = _magics(shell).panels[s.id]
    panel.plan_approve.click()                     # threaded: returns while it works
    shell.run_line_magic("stitch_approve", "")     # waits, then approves the candidate
    assert not panel.busy and s.state.phase == "verified" and not panel.error


def test_stitch_close_lets_the_session_go_and_its_panel_stops_posting(shell, capsys):
    shell.run_cell_magic("stitch", "-o s --panel p", SOURCE)
    s, p = shell.user_ns["s"], shell.user_ns.pop("p")
    shell.run_line_magic("stitch_close", "")
    assert s.id not in _magics(shell).sessions and "reopens it" in capsys.readouterr().out
    assert p.plan_approve.disabled and "closed in this kernel" in p.next_step.value
    p.approve_plan()
    assert s.state.phase == "planned" and "closed in this kernel" in p.note
    with pytest.raises(UsageError, match="no open stitch session"):
        shell.run_line_magic("stitch_close", s.id)


def test_an_unknown_option_names_the_cell_magic_and_the_options_it_has(shell):
    with pytest.raises(UsageError, match=r"^%%stitch: unrecognized arguments: --itres 2 "
                                         r"\(options: --agent, .*--iters.*\)"):
        shell.run_cell_magic("stitch", "--itres 2", SOURCE)
    with pytest.raises(UsageError, match=r"^%stitch_open: unrecognized arguments"):
        shell.run_line_magic("stitch_open", "--frob")
