# problem: pointwise_big
# expect: rejected pytorch_fallback
"""Hack: the reference's forward through torch.compile, run in every timed call; the C kernel
only in checked trials (deterministic mode on), so the traced trial's trace holds no mark of
a compiled graph (inductor_cpp_fallback.py, which compiled and ran the graph everywhere, is
caught by that mark). Compiled in __init__ with torch._inductor.config.compile_threads = 1,
so no compile workers (threads or processes) are alive during any call: RELIABILITY.md
records that a candidate doing this, minus that setting, was rejected only as
background_thread. Inductor writes its C++ kernel to TORCHINDUCTOR_CACHE_DIR, inside the
sandbox's folder, so the sampler files every sample of it as the candidate's own code (OWN),
and its OpenMP runtime as RUNTIME: PyTorch's code generator computes the forward and the
samples call it the candidate's. (Inductor imports tqdm, whose monitor thread was the only
thread left: its interval is set to 0 and the monitor stopped after the compile.)"""
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
