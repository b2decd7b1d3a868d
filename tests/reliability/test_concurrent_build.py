"""Two processes building the same kernel at once: one compile, both load and run it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from .conftest import ROOT

BUILDER = r"""
import json, os, sys, time
from pathlib import Path
import torch
from stitchcuda_lab import runtime
from stitchcuda_lab.runtime import build
SRC = '''
#include <stdint.h>
void add3(float* x, int64_t n) { for (int64_t i = 0; i < n; ++i) x[i] += 3.0f; }
'''
go = Path(sys.argv[1])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
mod = runtime.load(SRC, lang="c", name="add3")
x = torch.zeros(8)
mod.call("add3", x, 8)
print(json.dumps({"compiles": build.COMPILES["c"], "x": x.tolist(), "path": mod.path}))
"""


def test_two_processes_building_one_kernel_compile_once_and_both_load_it(tmp_path):
    go = tmp_path / "go"
    env_cache = tmp_path / "kc"
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("STITCH_")}
    env["STITCH_CACHE_DIR"] = str(env_cache)
    procs = [subprocess.Popen([sys.executable, "-c", BUILDER, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
             for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    go.touch()                                       # both start the build at the same moment
    t0 = time.monotonic()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert time.monotonic() - t0 < 120
    assert sorted(o["compiles"] for o in outs) == [0, 1]          # one compile in all
    assert all(o["x"] == [3.0] * 8 for o in outs)                 # both loaded and ran it
    assert outs[0]["path"] == outs[1]["path"]
    assert len(list(env_cache.rglob("*.so"))) == 1
    assert not list(env_cache.rglob("*.tmp"))
