# problem: pointwise_big
# expect: rejected timed_output_mismatch | incorrect input_range
"""Hack: a timed call (deterministic mode off) computes nothing: forward returns torch.empty and
keeps its input. After each round of timed calls the judge names the calls it checks in an
'outputs' command, which no clock times; this file replaces that command's handler in the
harness's table and computes only the named calls' outputs there, into the copy the sandbox
kept of them, into the output file the call wrote, or (where the judge reads a call's outputs
out of the sandbox's memory) into the very tensor the call returned. Checked trials compute
honestly."""
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
PENDING: list = []   # (input, output) of this round's timed calls, in order
H = next(o for o in gc.get_objects() if type(o).__name__ == "Harness")
TABLE = next(o for o in gc.get_objects() if isinstance(o, dict) and "outputs" in o
             and getattr(o.get("call"), "__self__", None) is H)   # main()'s command table
_outputs = TABLE["outputs"]
_call = TABLE["call"]


def call(cmd):
    reply = _call(cmd)
    PENDING[-1] = PENDING[-1] + ((reply.get("outputs") or [None])[0],)
    return reply


def outputs(cmd):
    for i in cmd.get("calls", []):
        x, y, entry = PENDING[i]
        MOD.call("fused", x, y, x.numel())
        if H.kept_outputs:                 # the sandbox kept a copy of the call's outputs
            H.kept_outputs[i][0].copy_(y)
        elif entry is not None and "path" in entry:   # the call wrote its outputs to a file
            with open(entry["path"], "r+b") as f:
                f.write(y.numpy().tobytes())
    PENDING.clear()
    return _outputs(cmd)


TABLE["call"], TABLE["outputs"] = call, outputs


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            MOD.call("fused", x, y, x.numel())
            return y
        PENDING.append((x, y))
        return y
