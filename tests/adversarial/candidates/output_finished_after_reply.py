# problem: pointwise_big
# expect: rejected timed_output_mismatch | incorrect input_range
"""Hack: a timed call's forward returns an empty tensor at once and a native thread (invisible to
the harness's thread check, which sees Python threads) fills it afterwards, on the second core,
while the harness answers and the judge takes the outputs: the work lands after the judge's
clock has stopped. The judge reads a timed call's outputs out of the candidate's memory in
pieces in an order it draws, so pieces it reads before the thread reaches them hold no answer.
Checked trials (deterministic mode) compute honestly in forward."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <pthread.h>
#include <stdint.h>
#include <time.h>
static const float* volatile src;
static float* volatile dst;
static volatile int64_t count, jobs = 0, done = 0, running = 0;
static void* work(void* arg) {
    for (;;) {
        while (jobs == done) { struct timespec t = {0, 2000}; nanosleep(&t, 0); }
        const float* x = src; float* y = dst;
        for (int64_t i = 0; i < count; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
        done = jobs;
    }
    return 0;
}
void later(const float* x, float* y, int64_t n) {
    if (!running) { pthread_t t; pthread_create(&t, 0, work, 0); pthread_detach(t); running = 1; }
    while (jobs != done) { struct timespec t = {0, 2000}; nanosleep(&t, 0); }
    src = x; dst = y; count = n; jobs = jobs + 1;
}
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
MOD = runtime.load(SRC, lang="c", name="output_later", flags=("-pthread",))
KEEP: list = []


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():
            MOD.call("fused", x, y, x.numel())
        else:
            KEEP[:] = [x, y]    # alive while the thread writes
            MOD.call("later", x, y, x.numel())
        return y
