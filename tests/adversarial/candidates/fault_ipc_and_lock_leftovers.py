# problem: pointwise
# expect: pass
# why: what it leaves is the fault; the forward is correct. tests/adversarial/test_leftovers.py checks that none of it is there after the job
"""Fault: leave what no process holds and no temporary folder keeps: a 64 MB SysV shared memory
segment (kernel memory that outlives every process), a POSIX message queue and a 64 MB file in
/run/lock (writable by anyone, like /tmp). Repeated jobs would fill the memory and the disk
for the jobs after them."""
import ctypes
import os

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEY = 0x57C4_1EF7      # tests/adversarial/test_leftovers.py looks for these three
QUEUE = b"/stitch_leftover_queue"
FILE = "/run/lock/.stitch_leftover_fill"
SIZE = 64 << 20

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
shmid = libc.shmget(KEY, ctypes.c_size_t(SIZE), 0o1000 | 0o666)       # IPC_CREAT
if shmid >= 0:
    addr = libc.shmat(shmid, None, 0)
    if addr not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(addr, 1, SIZE)     # its pages exist now
        libc.shmdt(ctypes.c_void_p(addr))
try:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    rt.mq_open(QUEUE, os.O_CREAT | os.O_RDWR, 0o666, None)
except OSError:
    pass
try:
    with open(FILE, "wb") as f:
        f.write(b"\1" * SIZE)
except OSError:
    pass

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        return y
