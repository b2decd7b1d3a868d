# problem: pointwise_big
# expect: rejected pytorch_fallback
"""Hack (sampler evidence, area 4): inductor_timed_only_big.py with Inductor's cache moved out
of the sandbox's folder. The reference's forward runs through torch.compile in every timed
call; the C kernel only in checked trials (deterministic mode), so no trace shows a compiled
graph. Sampler._file_kind names a file in the sandbox's own folders OWN only where the judge
built and handed it (so Inductor's library, written to TORCHINDUCTOR_CACHE_DIR in the sandbox's
folder, is PACKAGE); but a file OUTSIDE those folders, outside the installed (trusted) folders,
with no build id the judge knows and no "/torch/" in its path falls through to the last line,
``return self._copied(path) or OWN``. Here TORCHINDUCTOR_CACHE_DIR is set, before the
compile, to a fresh folder under /dev/shm (any folder the candidate may write will do: /tmp,
/var/tmp, its outputs folder), so every sample of Inductor's C++ is filed as the candidate's
own code, and PyTorch's code generator computes the forward unseen."""

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


def _ref(x):
    return torch.relu(x * 2.0 + 1.0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        try:   # tqdm (imported by Inductor) starts a monitor thread: none, please
            import tqdm
            tqdm.tqdm.monitor_interval = 0
        except ImportError:
            pass
        import os
        import tempfile
        # Inductor's cache outside the sandbox's folders (own_folders): read at use, not import
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind_", dir="/dev/shm")
        import torch._inductor.config as cfg
        cfg.compile_threads = 1
        self.compiled = torch.compile(_ref, dynamic=False)
        with torch.no_grad():
            self.compiled(torch.randn(2048, 2048))   # compiled now, not in a call
        try:
            import tqdm
            if tqdm.tqdm.monitor is not None:
                tqdm.tqdm.monitor.exit()
                tqdm.tqdm.monitor.join()
        except Exception:  # noqa: BLE001
            pass

    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        return self.compiled(x)
