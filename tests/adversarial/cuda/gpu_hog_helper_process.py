# problem: pointwise
# expect: rejected subprocess
# timeout: 180
"""Hack: at import, start a detached helper (double-forked through sh, setsid: reparented to
init, never reaped by the sandbox) with a CUDA context of its own that keeps the GPU busy with
large matmuls, so the judge's eager baseline shares the GPU by time-slicing; the helper exits
as soon as the candidate's first timed call touches a flag file, before the judge looks."""
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

FLAG = os.path.join(os.getcwd(), ".timing_started")
READY = os.path.join(os.getcwd(), ".hog_ready")
HOG = f"""
import os, time, torch
a = torch.randn(8192, 8192, device="cuda")
open({READY!r}, "w").close()
end = time.time() + 120
while time.time() < end and not os.path.exists({FLAG!r}):
    for _ in range(4):
        a = (a @ a).mul_(1e-4)
    torch.cuda.synchronize()
"""
with open("hog.py", "w") as f:
    f.write(HOG)
subprocess.run(["sh", "-c", f"setsid {sys.executable} hog.py </dev/null >/dev/null 2>&1 &"],
               check=False, close_fds=True)
for _ in range(600):
    if os.path.exists(READY):
        break
    time.sleep(0.1)

SRC = r"""
extern "C" __global__ void fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="cuda", name="fused")

    def forward(self, x):
        if not torch.are_deterministic_algorithms_enabled() and not os.path.exists(FLAG):
            open(FLAG, "w").close()
            time.sleep(0.5)
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.mod.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))
        return y
