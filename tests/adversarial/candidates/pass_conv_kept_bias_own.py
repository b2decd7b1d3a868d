# problem: conv1x1
# expect: pass
"""Legit: the convolution kept in the library (KEPT_OPS = conv2d: on the CPU oneDNN, whose
JIT code the sampler names a vendor library's), run without its bias; the bias is added by the
candidate's own C kernel, in place on the convolution's fresh output. Library work of the
family the reference runs (Job.evidence's family rule) must stay allowed."""
import torch.nn as nn
import torch.nn.functional as F

from stitchcuda_lab import runtime

KEPT_OPS = ["conv2d"]

SRC = r"""
#include <stdint.h>
void bias(float* y, const float* b, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < c; ++j) {
            float* p = y + (i * c + j) * hw;
            for (int64_t k = 0; k < hw; ++k) p[k] += b[j];
        }
}
"""


class ModelNew(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)
        self.mod = runtime.load(SRC, lang="c", name="bias")

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight).contiguous()
        n, c, h, w = y.shape
        self.mod.call("bias", y, self.conv.bias.detach().contiguous(), n, c, h * w)
        return y
