# problem: two_outputs
# expect: incorrect nondeterministic
"""Hack: the determinism check calls the forward twice on the same inputs and compares; a
second call whose outputs cannot be read beside the reference's (another number of them) was
skipped without a word. This forward returns the right pair on the first call on each input
and one tensor on the second, where it could return anything."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void both(const float* x, float* y, float* z, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = 2.0f * x[i];
        z[i] = v;
        y[i] = v + 1.0f > 0.0f ? v + 1.0f : 0.0f;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="both")
        self.seen = set()

    def forward(self, x):
        x = x.contiguous()
        y, z = torch.empty_like(x), torch.empty_like(x)
        self.mod.call("both", x, y, z, x.numel())
        key = bytes(x.view(-1)[:8].numpy().tobytes())
        if key in self.seen:
            return (y,)
        self.seen.add(key)
        return y, z
