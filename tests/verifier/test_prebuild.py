"""Several candidates' kernels compiled side by side before each is verified alone
(verifier/prebuild.py): the cache is warm afterwards, and nothing of that phase outlives it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

ADV = Path(__file__).parent.parent / "adversarial"
POINTWISE = (ADV / "problems" / "pointwise.py").read_text()
GOOD = (ADV / "candidates" / "pass_c_kernel.py").read_text()

BROKEN = GOOD.replace("float v = 2.0f", "float v = 2.0f +")       # does not compile

HANG_AT_IMPORT = '''
import torch.nn as nn
while True:
    pass
class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''

# At import: a child process and a thread that spin forever, their pids written where the
# test can read them. Both must be gone when the phase ends, before anyone is timed.
LINGERER = '''
import os, threading
import torch.nn as nn
pid = os.fork()
if pid == 0:
    while True:
        pass
threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
with open(os.path.join({folder!r}, "pids"), "w") as f:
    f.write(f"{{os.getpid()}} {{pid}}")
class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def _variant(i: int) -> str:
    """The good candidate with another constant: another kernel source, another cache entry."""
    return GOOD.replace("+ 1.0f", f"+ 1.0f + 0.0f * {i}.0f")


def _entries(cache: Path) -> set[str]:
    return {p.name for p in cache.rglob("*.json")}


def test_prebuild_compiles_each_kernel_once_and_each_candidate_then_passes(cpu_worker,
                                                                           fast_options):
    cache = Path(cpu_worker.cache_dir)
    sources = [_variant(i) for i in range(3)] + [BROKEN]
    built = cpu_worker.prebuild(POINTWISE, sources, options=fast_options, timeout=60)
    assert [b["loaded"] for b in built] == [True, True, True, False], built
    assert built[3]["failure"] == "build_error: compile_error"
    warm = _entries(cache)
    assert len(warm) == 3
    for src in sources[:3]:
        v = cpu_worker.verify(POINTWISE, src, replaced=None, options=fast_options, timeout=60)
        assert v.status == "pass", v.reason
    assert _entries(cache) == warm                      # every build was a hit


def test_an_import_that_never_ends_is_cut_off_and_the_others_are_built(cpu_worker,
                                                                       fast_options):
    t0 = time.monotonic()
    built = cpu_worker.prebuild(POINTWISE, [HANG_AT_IMPORT, GOOD], options=fast_options,
                                timeout=100)
    took = time.monotonic() - t0
    assert built[1]["loaded"] and not built[0]["loaded"], built
    assert took < 40, took                              # the straggler's grace, not 100 s
    v = cpu_worker.verify(POINTWISE, GOOD, replaced=None, options=fast_options, timeout=60)
    assert v.status == "pass", v.reason


def test_nothing_a_candidate_started_in_the_phase_outlives_it(cpu_worker, fast_options):
    top = tempfile.mkdtemp(prefix="stitch_test_pids_")
    os.chmod(top, 0o755)
    # the candidate's user may write its pids here; a level below the temp folders, whose
    # world-writable folders a sandbox's end empties of its users' files
    folder = os.path.join(top, "w")
    os.mkdir(folder)
    os.chmod(folder, 0o1777)
    try:
        built = cpu_worker.prebuild(POINTWISE, [LINGERER.format(folder=folder), GOOD],
                                    options=fast_options, timeout=60)
        assert all(b["loaded"] for b in built), built
        pids = [int(p) for p in Path(folder, "pids").read_text().split()]
        assert len(pids) == 2
        time.sleep(0.2)
        alive = [p for p in pids if Path(f"/proc/{p}").exists()
                 and Path(f"/proc/{p}/stat").read_text().split()[2] != "Z"]
        assert alive == []
    finally:
        shutil.rmtree(top, ignore_errors=True)
