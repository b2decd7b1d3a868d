# problem: pointwise_big
# expect: rejected patched_timer | rejected timed_output_mismatch | pass
"""Hack (pointwise_big twin of c_sigaction_posix_timer.py: a 16 MB memory-bound pass,
whose judge-clock allowance, 2 ms plus half the path, is large) (work moved past the candidate's timer by a signal, installed in C): the Python-level
version (candidates/signal_handler_fills_after_timer.py) is refused because the harness compares
each signal's *Python* handler (signal.getsignal) and the *setitimer* timers after a timed call
(antihack.work_after_timer). Here the C kernel installs the handler with sigaction() (Python's
handler table never learns of it) and arms a one-shot POSIX timer with timer_create() +
timer_settime() (not an ITIMER, so getitimer sees nothing), aimed at the calling thread
(SIGEV_THREAD_ID). In a timed call forward returns an unwritten output at once; 50 us later the
handler runs on the main thread, wherever the harness is (after the timer's end reading, before
the reply) and fills the output. Checked trials (deterministic mode) compute in forward.

Not refused: the harness sees Python's signal handlers and interval timers, not a handler
installed with sigaction nor a POSIX timer. Its work still lands on the judge's clock, which
counted it (the candidate's timer said 0.14 ms, the verdict 3.8 ms; its honest control ran
faster): what it can hide is the clock's allowance (docs/RELIABILITY.md, Remaining limits).
"""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#ifndef SA_RESTART
#define SA_RESTART 0x10000000
#endif
#define MY_SIGEV_THREAD_ID 4
long syscall(long number, ...);
static const float* px; static float* py; static int64_t pn = 0;
static int ready = 0; static timer_t tid;
static void fill(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
static void on_sig(int s) { (void)s; if (pn) { fill(px, py, pn); pn = 0; } }
void exp4(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
int exp4_later(const float* x, float* y, int64_t n) {
    if (pn) { fill(px, py, pn); pn = 0; }
    if (!ready) {
        struct sigaction sa; memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sig; sa.sa_flags = SA_RESTART; sigemptyset(&sa.sa_mask);
        if (sigaction(SIGRTMIN + 7, &sa, 0)) return -1;
        struct sigevent ev; memset(&ev, 0, sizeof ev);
        ev.sigev_notify = MY_SIGEV_THREAD_ID; ev.sigev_signo = SIGRTMIN + 7;
        ev._sigev_un._tid = (int)syscall(SYS_gettid);
        if (timer_create(CLOCK_MONOTONIC, &ev, &tid)) return -2;
        ready = 1;
    }
    px = x; py = y; pn = n;
    struct itimerspec its; memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = 50000;
    if (timer_settime(tid, 0, &its, 0)) { fill(x, y, n); pn = 0; return -3; }
    return 0;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="relu_c_alarm_big")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():
            self.mod.call("exp4", x, y, x.numel())
            return y
        self.mod.call("exp4_later", x, y, x.numel())
        return y
