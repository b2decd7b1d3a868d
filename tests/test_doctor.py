import json
import subprocess
import sys
import types

from stitchcuda_lab import doctor


def test_api_key_presence_is_reported_but_never_its_value():
    secret = "sk-ant-test-DO-NOT-PRINT-123"
    c = doctor.check_api_key({"ANTHROPIC_API_KEY": secret})
    assert c.ok and secret not in c.detail and secret not in c.fix
    missing = doctor.check_api_key({})
    assert not missing.ok and "ANTHROPIC_API_KEY" in missing.detail and not missing.required


def test_unwritable_folder_is_a_required_failure_with_a_fix(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    c = doctor.check_folder("cache folder", str(blocker / "sub"))
    assert not c.ok and c.required and "STITCH_CACHE_DIR" in c.fix


def test_c_compiler_check_builds_openmp():
    assert doctor.check_cc().ok


def test_missing_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc-xyz")
    c = doctor.check_cc()
    assert not c.ok and "gcc" in c.fix


def test_doctor_json_lists_every_check(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("STITCH_SESSIONS_DIR", str(tmp_path / "s"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    out = subprocess.run([sys.executable, "-c",
                          "import types,sys; from stitchcuda_lab.doctor import main_doctor;"
                          "sys.exit(main_doctor(types.SimpleNamespace(json=True)))"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "sk-ant-secret-value" not in out.stdout
    names = {c["name"] for c in json.loads(out.stdout)}
    assert {"torch", "gpu", "tensor cores", "nvrtc", "c compiler", "ncu", "cache folder",
            "sessions folder", "anthropic key"} <= names


def test_required_failure_gives_exit_code_1(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("STITCH_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("STITCH_SESSIONS_DIR", str(tmp_path / "s"))
    assert doctor.main_doctor(types.SimpleNamespace(json=False)) == 1
    assert "fix:" in capsys.readouterr().out


def test_tensor_cores_check_says_why_the_split_is_not_used(monkeypatch):
    from stitchcuda_lab.settings import Settings
    off = doctor.check_tensor_cores(Settings().replace(tensor_cores=False))
    assert not off.ok and not off.required and "STITCH_TENSOR_CORES=1" in off.fix
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (7, 0))
    old = doctor.check_tensor_cores(Settings())
    assert not old.ok and "sm_70" in old.detail and "no TF32" in old.detail
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (9, 0))
    assert doctor.check_tensor_cores(Settings()).ok
