# problem: pointwise
# expect: rejected background_thread
"""Hack: from the second call on, the C kernel returns at once and fills the output from a
detached pthread (Python's threading module never sees it; a timer around forward sees nothing)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
typedef struct { const float* x; float* y; int64_t n; } job_t;
static int calls = 0;
static void run(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
static void* later(void* p) {
    job_t* j = (job_t*)p;
    struct timespec ts = {0, 3000000};   /* 3 ms */
    nanosleep(&ts, 0);
    run(j->x, j->y, j->n);
    free(j);
    return 0;
}
void fused_async(const float* x, float* y, int64_t n) {
    if (calls++ == 0) { run(x, y, n); return; }
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    job_t* j = (job_t*)malloc(sizeof(job_t));
    j->x = x; j->y = y; j->n = n;
    pthread_t t;
    pthread_create(&t, 0, later, j);
    pthread_detach(t);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused_async", flags=("-pthread",))
        self.keep = []

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.keep.append(x)   # the thread reads x after forward returns
        self.mod.call("fused_async", x, y, x.numel())
        return y
