# problem: pointwise_big
# expect: rejected timed_output_mismatch
"""Hack: a timed call (deterministic mode off) launches nothing: forward returns torch.empty.
After each round the judge names the calls it checks in an 'outputs' command, which no clock
times; this file replaces that command's handler in the harness's table and computes only the
named calls' outputs there: into the copies the sandbox kept of them, and into the judge's
arena (arena.py) at every place a call's entries named. The judge took its copy of each call
out of the arena as the call answered, so what lands there later reaches nothing it reads.
Checked trials compute honestly."""
import gc

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
extern "C" __global__ void fused(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""
MOD = runtime.load(SRC, lang="cuda", name="fused")


def fused(x, y):
    n = x.numel()
    MOD.launch("fused", grid=((n + 255) // 256, 1, 1), block=(256, 1, 1), args=(x, y, n))
    return y


PENDING: list = []   # (input, output, arena entries) of this round's timed calls, in order
H = next(o for o in gc.get_objects() if type(o).__name__ == "Harness")
TABLE = next(o for o in gc.get_objects() if isinstance(o, dict) and "outputs" in o
             and getattr(o.get("call"), "__self__", None) is H)   # main()'s command table
_outputs = TABLE["outputs"]
_call = TABLE["call"]


def call(cmd):
    reply = _call(cmd)
    placed = reply.get("arena") or [[]]
    PENDING[-1] = PENDING[-1] + (placed[0],)
    return reply


def outputs(cmd):
    for i in cmd.get("calls", []):
        if i >= len(PENDING):
            continue
        x, y, placed = PENDING[i]
        fused(x, y)
        if H.kept_outputs:                      # the sandbox's own copies (no arena)
            H.kept_outputs[i][0].copy_(y)
        if H.arena is not None:
            for e in placed:                    # where the call's outputs went
                if "at" in e:
                    flat = y.reshape(-1).view(torch.uint8)
                    H.arena.whole[e["at"]:e["at"] + flat.numel()].copy_(flat)
    torch.cuda.synchronize()
    PENDING.clear()
    return _outputs(cmd)


TABLE["call"], TABLE["outputs"] = call, outputs


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            return fused(x, y)
        PENDING.append((x, y))
        return y
