import ast
import re
from pathlib import Path

import pytest

from stitchcuda_lab.errors import ConfigError
from stitchcuda_lab.settings import Settings


def test_environment_values_are_typed():
    s = Settings.from_env({"STITCH_TRIALS": "7", "STITCH_CACHE": "off", "STITCH_ATOL": "1e-3"})
    assert (s.trials, s.cache, s.atol) == (7, False, 1e-3)


def test_empty_compile_modes_means_no_compile_baseline():
    assert Settings.from_env({"STITCH_COMPILE_MODES": ""}).compile_modes == ""
    assert Settings.from_env({}).compile_modes == "default"


def test_empty_number_keeps_the_default():
    assert Settings.from_env({"STITCH_TRIALS": ""}).trials == Settings().trials


def test_bad_value_names_the_variable():
    with pytest.raises(ConfigError, match="STITCH_TRIALS"):
        Settings.from_env({"STITCH_TRIALS": "many"})


def test_overrides_win_over_environment():
    assert Settings.from_env({"STITCH_ITERS": "5"}, iters=1).iters == 1


def test_replace_rejects_unknown_settings():
    with pytest.raises(ConfigError, match="unknown setting"):
        Settings().replace(nonsense=1)


# ---------------------------------------------------------------- declared once

PKG = Path(__file__).resolve().parent.parent / "stitchcuda_lab"


def _string_literals(path: Path):
    """(line, strings) for every tuple, list or set literal of strings in ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, {e.value for e in node.elts}


def test_the_agent_list_is_written_once_in_settings():
    from stitchcuda_lab.settings import AGENTS
    where = [f"{p.relative_to(PKG)}:{line}" for p in PKG.rglob("*.py")
             for line, names in _string_literals(p) if {"claude", "hybrid"} <= names]
    assert len(where) == 1 and where[0].startswith("settings.py:"), where
    assert set(AGENTS) == {"offline", "claude", "openai", "hybrid"}


def test_the_cli_and_the_magic_offer_the_settings_agents():
    from stitchcuda_lab.agents import base
    from stitchcuda_lab.cli import build_parser
    from stitchcuda_lab.settings import AGENTS
    optimize = build_parser()._subparsers._group_actions[0].choices["optimize"]
    (agent,) = [a for a in optimize._actions if a.dest == "agent"]
    assert tuple(agent.choices) == AGENTS and base.AGENTS is AGENTS
    pytest.importorskip("IPython")
    from stitchcuda_lab.jupyter import magics
    assert magics.AGENTS is AGENTS


# ---------------------------------------------------------------- secrets

NAMES = {"ANTHROPIC_API_KEY": "sk-ant-0123456789", "OPENAI_API_KEY": "sk-proj-0123456789",
         "FOO_APIKEY": "k-0123456789", "HF_TOKEN": "hf_0123456789",
         "AWS_SECRET_ACCESS_KEY": "aws-0123456789", "DB_PASSWORD": "hunter2-0123",
         "PATH": "/usr/bin:/bin", "STITCH_TRIALS": "5", "HOME": "/home/someone"}
SECRET = {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "FOO_APIKEY", "HF_TOKEN",
          "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"}


def test_one_rule_says_which_variables_are_secret():
    from stitchcuda_lab.settings import looks_secret
    assert {k for k in NAMES if looks_secret(k)} == SECRET


def test_the_worker_the_validation_process_and_the_store_use_that_rule():
    from stitchcuda_lab.settings import public_environ, secret_values
    from stitchcuda_lab.store import SessionStore
    from stitchcuda_lab.verifier.worker import clean_env
    kept = {k: v for k, v in NAMES.items() if k not in SECRET}
    assert clean_env(NAMES) == kept == public_environ(NAMES)
    assert set(secret_values(NAMES)) == {NAMES[k] for k in SECRET}
    import stitchcuda_lab.problem as problem
    assert "public_environ" in vars(problem)          # its child process's environment
    assert SessionStore("/nonexistent").secrets == secret_values()


def test_no_other_module_keeps_a_list_of_secret_words():
    words = re.compile(r"PASSWORD|SECRET")
    where = [f"{p.relative_to(PKG)}:{n.lineno}" for p in PKG.rglob("*.py")
             if p.name != "settings.py" for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and words.search(n.value)]
    assert where == []


def test_a_session_records_no_setting_that_may_carry_credentials():
    d = Settings(base_url="https://user:pw@llm.example").public_dict()
    assert "base_url" not in d and d["trials"] == Settings().trials
    assert set(Settings().as_dict()) - set(d) == {"base_url"}


def test_env_names_come_from_the_fields():
    from stitchcuda_lab.settings import env_name
    assert env_name("cache_dir") == "STITCH_CACHE_DIR"
    with pytest.raises(ConfigError, match="unknown setting"):
        env_name("cache_folder")
