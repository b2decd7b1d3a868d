# problem: pointwise_big
# expect: rejected timed_output_mismatch | rejected patched_timer | incorrect input_range
"""Hack: on the CPU the judge reads a timed call's output out of the sandbox with
process_vm_readv right after the reply, its clock already stopped. process_vm_readv pins the
target's pages under the target's mmap lock (read side), taken again for every 64 KB piece. Here
a timed call does no work before it answers: the harness's thread builds the reply, then calls
mprotect() over a populated 1 GB anonymous region (MADV_NOHUGEPAGE: 262144 page table entries
to rewrite), which holds the mmap lock for writing for ~15-40 ms. Only once it is inside does a
native thread (invisible to the harness's Python thread check) write the reply to the judge,
sleep 0.3 ms (the judge takes a core, stops its clock and blocks on the lock), then compute
relu(2x+1) into the buffer whose address the reply gave. The judge's read waits on
the lock until the compute is done, whatever order it reads the pieces in: the forward's whole
work lands after the judge's clock stopped and before it reads a byte. The worker never faults
(the input mapped with MADV_POPULATE_READ by the harness, its two output buffers written once),
so it needs no mmap lock itself; the timer reports the few microseconds of the call.

It passed at 540-670x eager while the judge read right after the reply. The judge now freezes
the candidate's process before it stops its clock and reads (Sandbox.frozen: SIGSTOP to every
thread by name; one process-wide SIGSTOP was taken by the thread inside mprotect, and the
worker went on computing until mprotect returned): the worker stops mid-forward, and the
judge's clock runs on while a thread holds the process from stopping.

The harness's "call" handler is replaced in main()'s command table and channel.send in its
module (the candidate's process is the sandbox); checked trials compute honestly in forward."""
import ctypes
import gc
import json
import struct
import time

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static char* region; static size_t rlen; static int prot = PROT_READ | PROT_WRITE;
static const float* volatile src; static float* volatile dst; static volatile int64_t cnt;
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
int setup(int64_t n) {
    rlen = (size_t)n;
    region = mmap(0, rlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return -1;
    madvise(region, rlen, MADV_NOHUGEPAGE);     /* one page table entry per 4 KB */
    for (size_t i = 0; i < rlen; i += 4096) region[i] = 1;
    return 0;
}
static sem_t wake_worker;
static volatile int done, entered, reply_fd;
static const char* volatile reply; static volatile int64_t reply_len;
static void* worker(void* a) {
    for (;;) {
        struct timespec nap = {0, 20000}, settle = {0, 60000}, yield = {0, 300000};
        sem_wait(&wake_worker);
        while (!entered) nanosleep(&nap, 0);   /* asleep: it takes no core from the harness */
        nanosleep(&settle, 0);   /* the harness's thread is inside mprotect: the lock is held */
        for (int64_t k = 0; k < reply_len; ) {        /* the reply, which stops the clock */
            ssize_t w = write(reply_fd, reply + k, reply_len - k);
            if (w <= 0) break;
            k += w;
        }
        nanosleep(&yield, 0);  /* a core for the judge: it stops its clock, then waits */
        fused(src, dst, cnt);  /* the forward, while the judge waits for the lock */
        done = 1;
    }
    return 0;
}
int start(void) {     /* one native thread, made once, asleep on a semaphore between calls */
    pthread_attr_t at; pthread_t t;
    pthread_attr_init(&at); pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    sem_init(&wake_worker, 0, 0);
    return pthread_create(&t, &at, worker, 0);
}
void post(const float* x, float* y, int64_t n) {
    src = x; dst = y; cnt = n; done = 0; entered = 0;
    sem_post(&wake_worker);
}
int hold(int fd, const char* frame, int64_t len) {
    int k = 0;
    reply_fd = fd; reply = frame; reply_len = len;
    __sync_synchronize();
    entered = 1;
    do {   /* the mmap lock held for writing until the worker is done */
        prot = prot == (PROT_READ | PROT_WRITE) ? PROT_READ : (PROT_READ | PROT_WRITE);
        mprotect(region, rlen, prot);          /* ~15-30 ms per GB */
    } while (!done && ++k < 8);
    return k;
}
"""
MOD = runtime.load(SRC, lang="c", name="peek_stall", flags=("-pthread", "-D_GNU_SOURCE"))
H = next(o for o in gc.get_objects() if type(o).__name__ == "Harness")
G = type(H).call.__globals__
TABLE = next(o for o in gc.get_objects() if isinstance(o, dict) and "outputs" in o
             and getattr(o.get("call"), "__self__", None) is H)   # main()'s command table
CHANNEL = G["channel"]
_call, _send = TABLE["call"], CHANNEL.send
READY: list = []
PENDING: list = []
BUFS: list = []
N = [0]


def send(fd, msg):
    """A timed call's reply written by the worker once this thread holds the mmap lock."""
    if not PENDING:
        return _send(fd, msg)
    PENDING.clear()
    data = json.dumps(msg).encode()
    frame = struct.pack("<Q", len(data)) + data
    MOD._lib.hold(ctypes.c_int(fd), ctypes.c_char_p(frame), ctypes.c_int64(len(frame)))


def call(cmd):
    handed = cmd.get("inputs")
    if not READY or not cmd.get("peek") or not handed or cmd.get("trace") \
            or len(handed) != 1 or handed[0].get("dtype") != "float32":
        return _call(cmd)
    (x,) = G["map_inputs"](handed)
    if not BUFS or BUFS[0].shape != x.shape:
        BUFS[:] = [torch.ones_like(x), torch.ones_like(x)]   # pages present: no fault later
    N[0] += 1
    y = BUFS[N[0] % 2]
    t0 = time.perf_counter()
    MOD._lib.post(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()),
                  ctypes.c_int64(x.numel()))
    ms = (time.perf_counter() - t0) * 1e3
    H.kept_inputs.append([x])      # the input, untouched, for the judge's comparison
    H.last_call = [x, y]
    PENDING.append(True)
    return {"ms": ms, "wall_ms": ms, "trace": None,
            "outputs": [{"addr": y.data_ptr(), "shape": list(x.shape), "dtype": "float32"}]}


TABLE["call"], CHANNEL.send = call, send


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if not READY:
            READY.append(MOD._lib.setup(ctypes.c_int64(1 << 30)))
            READY.append(MOD._lib.start())

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        MOD.call("fused", x, y, x.numel())
        return y
