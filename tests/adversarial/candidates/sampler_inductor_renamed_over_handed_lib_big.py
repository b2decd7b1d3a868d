# problem: pointwise_big
# expect: rejected pytorch_fallback
"""Hack (sampler evidence, area 4): inductor_timed_only_big.py, with Inductor's library then
renamed over the library the judge built and handed over. The reference's forward runs
through torch.compile in every timed call; the C kernel only in checked trials (deterministic
mode). Sampler._file_kind trusts a file in the sandbox's folder as the candidate's own code
(OWN) by its PATH being one the judge handed over (Job.handed); but pool.give makes that file
the candidate's (fchown to its uid), so the candidate may replace it. After the compile,
Inductor's .so (found in /proc/self/maps) is renamed onto the handed library's path: the
maps now name Inductor's mapping by the handed path, its build id is one the judge never
loaded, and every sample of PyTorch's generated code is filed as the candidate's own."""

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
        import os
        # Inductor's library, mapped from the cache in this folder, renamed over ours: the
        # mapping is then named by the path the judge handed over
        for line in open("/proc/self/maps"):
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1] and "/inductor/" in parts[5] \
                    and parts[5].strip().endswith(".so"):
                os.rename(parts[5].strip(), self.mod.path)
                break

    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            x = x.contiguous()
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        return self.compiled(x)
