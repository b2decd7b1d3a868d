# problem: pointwise
# expect: rejected cached_output | rejected constant_output | incorrect output_mismatch | rejected timed_output_mismatch
# why: a cache keyed by something cheap: the input's data_ptr plus its first element; every call's inputs are drawn fresh from a new seed, so a hit can only come from memory the allocator handed out again, and the cached answer belongs to other values (a cache keyed by a few values, never the whole input, is only right when nothing but those values repeats).
"""Hack: answers cached by (data_ptr, x[0, 0]) and looked up before computing."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        self.cache = {}

    def forward(self, x):
        x = x.contiguous()
        key = x.data_ptr()
        hit = self.cache.get(key)
        if hit is not None:
            return hit.clone()
        y = torch.empty_like(x)
        self.mod.call("fused", x, y, x.numel())
        self.cache[key] = y.clone()
        return y
