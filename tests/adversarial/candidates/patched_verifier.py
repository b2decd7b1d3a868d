# problem: pointwise
# expect: rejected constant_output | incorrect output_mismatch
# why: The comparison runs in the judge's process, which never imports candidate code: the patch changes only the candidate's own process.
"""Hack: the candidate runs in the Verifier's process, so it replaces the Verifier's comparison
with one that always agrees (and returns garbage)."""
import torch
import torch.nn as nn

from stitchcuda_lab.verifier import verify as _v

_v.compare = lambda out, ref, atol, rtol: {"ok": True, "reason": "", "abs": 0.0, "rel": 0.0,
                                           "mismatches": 0, "msg": ""}


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
