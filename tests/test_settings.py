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
