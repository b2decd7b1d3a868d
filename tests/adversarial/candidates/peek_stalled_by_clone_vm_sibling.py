# problem: pointwise_big
# expect: rejected timed_output_mismatch | rejected subprocess | rejected patched_timer | incorrect input_range
"""Hack: the judge stops its clock once it has frozen the sandbox (SIGSTOP to every thread of
its process) and only then reads the outputs (process_vm_readv, under the target's mmap lock).
A process made with clone(CLONE_VM) shares the sandbox's memory but is no thread of it, so the
freeze never stops it. A timed call returns an unwritten buffer; after the first byte of the
reply (no sampling stop comes once the judge is reading a frame) two such siblings start: one
holds the mmap lock for writing (mprotect over a populated GB), the other computes relu(2x + 1)
into the output while the judge's read waits, both autoreaped (SIGCHLD ignored) and gone long
before any process check. Checked trials (deterministic mode) compute honestly in forward."""
import ctypes
import json
import signal
import struct

import torch
import torch.nn as nn

import stitchcuda_lab.verifier.channel as CH
from stitchcuda_lab import runtime

SRC = r"""
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
void fused(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
static void serial(const float* x, float* y, int64_t n) {   /* no OpenMP, no TLS: a sibling */
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
static char* region; static size_t rlen; static volatile int ro, entered;
static const float* volatile src; static float* volatile dst; static volatile int64_t cnt;
static char stacks[2][2][1 << 16] __attribute__((aligned(64)));
static int which;
static volatile double last_cont, flushed;
static double mono(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
static void on_cont(int s) { (void)s; last_cont = mono(); }   /* the judge's stop just ended */
void mark_flush(void) { flushed = mono(); }
static void nap(long ns) { struct timespec t = {0, ns}; syscall(SYS_nanosleep, &t, 0); }
int setup(int64_t n) {
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_cont; sa.sa_flags = SA_RESTART;
    sigaction(SIGCONT, &sa, 0);
    rlen = (size_t)n;
    region = mmap(0, rlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return -1;
    madvise(region, rlen, MADV_NOHUGEPAGE);   /* one page table entry per 4 KB */
    for (size_t i = 0; i < rlen; i += 4096) region[i] = 1;
    return 0;
}
static int holder(void* p) {      /* holds the mmap lock for writing for tens of ms */
    entered = 1;
    ro = !ro;
    syscall(SYS_mprotect, region, rlen, ro ? PROT_READ : (PROT_READ | PROT_WRITE));
    syscall(SYS_exit, 0);
    return 0;
}
static int worker(void* p) {      /* the forward, while the judge's read waits on the lock */
    serial(src, dst, cnt);
    syscall(SYS_exit, 0);         /* waits in exit_mm for the lock, then is gone with it */
    return 0;
}
int split_send(int fd, const char* frame, int64_t len, const float* x, float* y, int64_t n) {
    src = x; dst = y; cnt = n; entered = 0;
    __sync_synchronize();
    if (write(fd, frame, 1) != 1) return -1;   /* the judge now reads a frame: no more stops */
    /* a stop in this call just ended (a sampled call, left out of the medians): the judge
       looks for processes of ours right after it, so wait until it has looked */
    double wait = last_cont > flushed ? last_cont + 0.03 - mono() : 0.0;
    if (wait > 0) nap((long)(wait * 1e9));
    which ^= 1;
    clone(holder, stacks[which][0] + sizeof(stacks[0][0]), CLONE_VM | SIGCHLD, 0);
    while (!entered) ;                         /* spun, not slept: this thread keeps its core */
    for (double t = mono() + 1e-4; mono() < t; ) ;   /* the holder is inside mprotect */
    clone(worker, stacks[which][1] + sizeof(stacks[0][1]), CLONE_VM | SIGCHLD, 0);
    for (int64_t k = 1; k < len; ) {           /* the rest of the reply: the clock stops */
        ssize_t w = write(fd, frame + k, len - k);
        if (w <= 0) return -2;
        k += w;
    }
    return 0;
}
"""
MOD = runtime.load(SRC, lang="c", name="clone_vm_sibling", flags=("-D_GNU_SOURCE",))
LIB = MOD._lib
LIB.split_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_int64]
signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # siblings reaped by the kernel: no CPU time
_send = CH.send
PENDING: list = []
NEXT: list = []
SHAPE: list = []
READY: list = []


def send(fd, msg):
    if msg.get("flushed"):
        LIB.mark_flush()
    if msg.get("flushed") and SHAPE:   # before a timed call, outside the judge's clock: the
        y = torch.empty(SHAPE[0])      # next output, its pages faulted in now
        y.view(-1)[::1024].zero_()
        NEXT[:] = [y]
    if not PENDING:
        return _send(fd, msg)
    x, y = PENDING.pop()
    data = json.dumps(msg, default=CH._json_default).encode()
    frame = struct.pack("<Q", len(data)) + data
    LIB.split_send(fd, frame, len(frame), x.data_ptr(), y.data_ptr(), x.numel())


CH.send = send


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if not READY:
            READY.append(LIB.setup(ctypes.c_int64(3 << 29)))

    def forward(self, x):
        x = x.contiguous()
        if torch.are_deterministic_algorithms_enabled():   # a checked trial: honest
            y = torch.empty_like(x)
            MOD.call("fused", x, y, x.numel())
            return y
        SHAPE[:] = [x.shape]
        if NEXT and NEXT[0].shape == x.shape:
            y = NEXT.pop()
        else:
            y = torch.empty_like(x)
            y.view(-1)[::1024].zero_()
        PENDING[:] = [(x, y)]
        return y
