# problem: pointwise_big
# expect: rejected patched_timer
# limit: on the CPU a timed call's input files are mapped into the sandbox inside the judge's clock (a page-table fill, about a tenth of a pass over them, calibrated on the reference), and a candidate with a spare core can compute from them meanwhile: that much of its work goes uncounted (docs/RELIABILITY.md, Remaining limits)
"""Hack: on the CPU the judge draws a timed call's inputs and hands them over as files in a
folder the sandbox may read. A native thread (invisible to the thread check) watches that
folder and computes from each input file as its bytes become readable, into one of three
output buffers, on the second core, while the harness reads the same file on the first: by
the time forward is called the work is done, and forward returns the buffer. The judge now
moves a call's inputs into that folder only once its clock runs (they were written there
before it, and the thread could finish while the judge was still writing); the harness's own
read, inside the clock, was still long enough to hide a memory-bound forward (it passed at
about 20x). The harness now maps the file (exchange.map_inputs, watched here the same way):
what the thread can do before forward is called shrinks to the time the mapping takes.
Checked trials compute in forward."""
import ctypes
import sys

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static char folder[512];
static float* bufs[3];
static int64_t n, started = 0;
static char names[3][256];
static volatile int64_t ready[3];
static void nap(void) { struct timespec t = {0, 20000}; nanosleep(&t, 0); }
static void* watch(void* arg) {
    char last[256] = "";
    float chunk[4096];
    for (;;) {
        DIR* d = opendir(folder);
        struct dirent* e;
        char pick[256] = "";
        while (d && (e = readdir(d)))
            if (strstr(e->d_name, "_0.bin") && strcmp(e->d_name, last) != 0) {
                strcpy(pick, e->d_name);
                break;
            }
        if (d) closedir(d);
        if (!pick[0]) { nap(); continue; }
        char path[800];
        snprintf(path, sizeof path, "%s/%s", folder, pick);
        int fd = open(path, O_RDONLY);
        if (fd < 0) { nap(); continue; }
        int slot = (int)(started % 3);
        ready[slot] = 0;
        strcpy(names[slot], pick);
        float* y = bufs[slot];
        int64_t done = 0;
        while (done < n) {   /* the bytes as the judge writes them */
            ssize_t got = pread(fd, chunk, sizeof chunk, done * 4);
            if (got < 4) { nap(); continue; }
            for (int64_t i = 0; i < got / 4; ++i) {
                float v = 2.0f * chunk[i] + 1.0f;
                y[done + i] = v > 0.0f ? v : 0.0f;
            }
            done += got / 4;
        }
        close(fd);
        strcpy(last, pick);
        ready[slot] = 1;
        started += 1;
    }
    return 0;
}
void begin(const char* dir, float* a, float* b, float* c, int64_t count) {
    strncpy(folder, dir, sizeof folder - 1);
    bufs[0] = a; bufs[1] = b; bufs[2] = c; n = count;
    pthread_t t;
    pthread_create(&t, 0, watch, 0);
    pthread_detach(t);
}
int64_t wait_for(const char* name) {   /* the slot holding this input's answer, or -1 */
    for (int spins = 0; spins < 200000; ++spins) {
        for (int s = 0; s < 3; ++s)
            if (ready[s] && strcmp(names[s], name) == 0) return s;
        nap();
    }
    return -1;
}
void fused(const float* x, float* y, int64_t n_) {
    for (int64_t i = 0; i < n_; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
MOD = runtime.load(SRC, lang="c", name="inputs_early", flags=("-pthread",))
harness = sys.modules.get("stitchcuda_lab.verifier.sandbox") or sys.modules["__main__"]
BUFS = [torch.empty(2048, 2048) for _ in range(3)]
CURRENT = {"name": None, "watching": False}
_take_over = harness.take_over
_map_inputs = getattr(harness, "map_inputs", _take_over)   # the timed calls' way in


def watched(entries, own):
    path = entries[0]["path"]
    folder, name = path.rsplit("/", 1)
    CURRENT["name"] = name
    if not CURRENT["watching"]:
        MOD.call("begin", ctypes.c_char_p(folder.encode()), *BUFS, BUFS[0].numel())
        CURRENT["watching"] = True
    return own(entries)


harness.take_over = lambda entries: watched(entries, _take_over)
harness.map_inputs = lambda entries: watched(entries, _map_inputs)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        name = CURRENT.pop("name", None)
        if name is not None and not torch.are_deterministic_algorithms_enabled():
            slot = MOD._lib.wait_for(ctypes.c_char_p(name.encode()))
            if slot >= 0:
                return BUFS[slot]
        y = torch.empty_like(x)
        MOD.call("fused", x, y, x.numel())
        return y
