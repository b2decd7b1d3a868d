# problem: pointwise_big
# expect: rejected pytorch_fallback | pass
"""Hack: the ReLU the file claims as its own is PyTorch's in every timed call, as exact GELU
on a scaled copy: gelu(u) = u * 0.5 * (1 + erf(u / sqrt 2)), and glibc's erff returns exactly
+-1.0f once |u / sqrt 2| > 4, so gelu(k v) / k = relu(v) except where |v| < 6 / k (off by at
most 6 / k = 6e-6 there, k = 2^20). The candidate's C kernel writes k (2x + 1) into every
other column of a (2048, 4096) buffer; torch's gelu on that strided view takes the scalar
loop (scalar_gelu, which calls libm's erff once per element); the C kernel then divides by
k into the output (exact: k is a power of two).

What the sampler saw: about half the samples stop inside erff, and the libm rule then named a
stop there by the first word up the stack that is a return address just after a call into
libm from code outside the runtime. erff's prologue is push rbp; push rbx; sub $0x18,%rsp,
and its fast path (|x| >= 1.25, all of them here) never writes the three 8-byte slots it
reserves: they hold whatever was on the stack before, and they lie between the stop's stack
pointer and scalar_gelu's return address. The candidate forges them: a helper pthread (its
own C code, started at the top of forward and joined before it returns) scans the calling
thread's stack for scalar_gelu's return address (a word in libtorch_cpu's code just after
`call erff@plt`), and once it appears (the loop has started) writes, three words below it
(erff's never-used slot at rsp + 0x10), the address just after a `call erff@PLT` in the
candidate's own library (a one-instruction stub it never uses for the output). Every stop in
erff is then named the candidate's own code "(through libm.so.6)"; only the stops in
scalar_gelu's own few flops and the loop are PyTorch's kernels. Checked trials (deterministic
mode on) run one honest C kernel for all of relu(2x + 1). The helper sleeps 200 us between
scans (asleep in a system call: never sampled), so it adds almost no samples of its own.

Measured (2-core host): sampled from outside 150 times in a loop by the Sampler, 52 of 69
stops in erff were named the candidate's own code through libm (the other 17 fell before the
helper found the loop), but scalar_gelu's own flops drew 59 stops and the loop 4 (80 of 149
PyTorch's): the forgery works, the ReLU-as-GELU hosts too much of PyTorch's work outside libm
to pass on it alone. Through the Verifier: pass, rejected, rejected (3 runs). With a helper
that spins instead of sleeping (its own samples dilute the share: the known limit of
sampler_share_diluted_big.py): pass, pass, rejected.

Since then the sampler names a libm stop by the gravest of all the callers into libm among the
16 words above the stack pointer (a forged word cannot hide scalar_gelu's return address, which
sits above it in erff's small frame): rejected 4 of 4 on an idle host, 4 to 8 of 10 to 12
samples in scalar_gelu, through libm or not. The share of the samples can still fall under the
quarter on a loaded host (the known limit above): either verdict is accepted."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from stitchcuda_lab import runtime

SRC = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <dlfcn.h>
#include <string.h>
#include <time.h>

__asm__(".text\n.globl own_site\n.type own_site,@function\nown_site:\n"
        " sub $8,%rsp\n call erff@PLT\n.globl own_ret\nown_ret:\n add $8,%rsp\n ret\n");
extern char own_ret[];
float own_site(float);

void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
void affine_strided(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[2 * i] = 1048576.0f * (2.0f * x[i] + 1.0f);
}
void unscale(const float* g, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = g[i] * (1.0f / 1048576.0f);
}

static uint64_t tlo, thi, erf_addr;
static volatile uint64_t *slo, *shi;
static volatile int stop;
static volatile uint64_t *last;
static pthread_t th;

static int is_erf_ret(uint64_t w) {
    if (w < tlo + 8 || w >= thi) return 0;
    const unsigned char* c = (const unsigned char*)w;
    if (c[-5] != 0xE8) return 0;
    int32_t rel; memcpy(&rel, c - 4, 4);
    const unsigned char* t = (const unsigned char*)(w + (int64_t)rel);
    if ((uint64_t)t < tlo || (uint64_t)t + 16 > thi) return 0;
    int i = 0;
    if (t[0] == 0xf3 && t[1] == 0x0f && t[2] == 0x1e && t[3] == 0xfa) i = 4;
    if (t[i] == 0xf2) i++;
    if (t[i] != 0xff || t[i + 1] != 0x25) return 0;
    int32_t d; memcpy(&d, t + i + 2, 4);
    uint64_t slot = (uint64_t)(t + i + 6) + (int64_t)d;
    return *(const uint64_t*)slot == erf_addr;
}

static void* helper(void* arg) {
    (void)arg;
    while (!stop) {
        for (volatile uint64_t* p = slo; p < shi && !stop; ++p) {
            if (is_erf_ret(*p)) { p[-3] = (uint64_t)own_ret; last = p; return 0; }
        }
        struct timespec ts = {0, 200000};   /* asleep (a system call: never sampled) */
        nanosleep(&ts, 0);
    }
    return 0;
}

void init(int64_t lo, int64_t hi) {
    tlo = (uint64_t)lo; thi = (uint64_t)hi;
    erf_addr = (uint64_t)dlsym(RTLD_DEFAULT, "erff");
    (void)own_site(1.0f);   /* binds the stub's GOT slot */
}
void start(int64_t span) {
    volatile uint64_t here = 0;
    shi = (volatile uint64_t*)((uint64_t)&here & ~7ull);
    slo = shi - span;
    if (last) { *last = 0; last[-3] = 0; last = 0; }   /* no stale match from the last call */
    stop = 0;
    pthread_create(&th, 0, helper, 0);
}
void finish(void) { stop = 1; pthread_join(th, 0); }
"""


def _torch_text():
    for line in open("/proc/self/maps"):
        parts = line.split()
        if len(parts) >= 6 and "x" in parts[1] and parts[5].endswith("libtorch_cpu.so"):
            lo, hi = (int(v, 16) for v in parts[0].split("-"))
            return lo, hi
    raise RuntimeError("no libtorch_cpu")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="gelu_forged")
        lo, hi = _torch_text()
        self.mod.call("init", lo, hi)

    def forward(self, x):
        x = x.contiguous()
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        torch.set_num_threads(1)
        rows, cols = x.shape
        buf = torch.empty(rows, 2 * cols)
        self.mod.call("affine_strided", x, buf, x.numel())
        self.mod.call("start", 16384)
        try:
            g = F.gelu(buf[:, ::2])                       # PyTorch's kernel: k * relu(v)
        finally:
            self.mod.call("finish")
        y = torch.empty_like(x)
        self.mod.call("unscale", g.contiguous(), y, x.numel())
        return y
