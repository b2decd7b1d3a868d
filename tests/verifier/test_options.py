"""VerifyOptions: the Verifier knobs of Settings, declared once there."""

from __future__ import annotations

import dataclasses

import pytest

from stitchcuda_lab.settings import VERIFIER_KNOBS, Settings
from stitchcuda_lab.verifier.options import VerifyOptions

SETTINGS = {f.name: f for f in dataclasses.fields(Settings)}
JOB_ONLY = {"time", "first"}   # what a job is told that no setting decides


def test_every_option_is_a_setting_with_the_same_type_and_default():
    options = {f.name: f for f in dataclasses.fields(VerifyOptions)}
    assert set(options) - JOB_ONLY == set(VERIFIER_KNOBS)
    for name in VERIFIER_KNOBS:
        assert options[name].default == SETTINGS[name].default, name
        assert str(options[name].type) == str(SETTINGS[name].type), name


def test_from_settings_copies_every_verifier_knob():
    changed = {"trials": 9, "timing_trials": 4, "warmup": 0, "atol": 1e-3, "rtol": 2e-3,
               "seed": 7, "compile_modes": "", "profile": False, "ncu": True,
               "gpu_lock": "/tmp/gpu0.lock", "cpu_flush_mb": 16}
    assert set(changed) == set(VERIFIER_KNOBS)
    opts = VerifyOptions.from_settings(Settings(**changed), time=False)
    assert opts.to_dict() == {**changed, "time": False, "first": False}


@pytest.mark.parametrize("modes, expected", [("default", ["default"]), ("", []),
                                             ("default, reduce-overhead", ["default",
                                                                          "reduce-overhead"])])
def test_modes_split_the_comma_list(modes, expected):
    assert VerifyOptions(compile_modes=modes).modes() == expected


def test_a_job_rebuilds_its_options_from_the_dict():
    opts = VerifyOptions(trials=6, profile=False)
    assert VerifyOptions(**opts.to_dict()) == opts
