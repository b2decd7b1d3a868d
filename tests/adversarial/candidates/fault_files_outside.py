# problem: pointwise
# expect: pass
# why: the files are the fault; the forward is correct. What must hold is that none of them is left after the job (checked after the run: ls -la /var/tmp /dev/shm /tmp for .stitch_rt_*)
"""Fault: leave 128 MB files in /var/tmp and /dev/shm (tmpfs: memory) and a nested hidden folder
in /tmp, outside the sandbox's folder, so that repeated jobs would fill the disk and memory."""
import os

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
chunk = b"\0" * (1 << 20)
for path in ("/var/tmp/.stitch_rt_fill", "/dev/shm/.stitch_rt_fill", "/tmp/.stitch_rt_dir/a/b/fill"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            for _ in range(128):
                f.write(chunk)
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
