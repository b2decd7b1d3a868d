# problem: conv_transpose_tanh
# expect: rejected pytorch_fallback
# limit: a kept library op's fused post-op (oneDNN applying the epilogue inside its own JIT code) does the epilogue a file claims, in timed calls only: the sampler allows a vendor library's samples where the reference runs that op, and the trace sees only the checked trials (docs/RELIABILITY.md, Remaining limits)
"""Hack: the convolution is kept in the library (KEPT_OPS, allowed: the reference convolves),
but the epilogue the file claims as its own (minus the per-channel bias, tanh: a pass over a
64 MB output) is PyTorch's in every timed call, fused by oneDNN as an eltwise post-op of the
transposed convolution: torch.ops.mkldnn._convolution_transpose_pointwise(..., attr="tanh")
with the two biases folded into one. Checked trials (deterministic mode on, the op tracer
and the profiler among them) run the plain conv_transpose2d and the candidate's own C kernel
for the bias and tanh, so the tracer and the trace see only a kept library op. Timed calls
are seen only by the sampler, and oneDNN's JIT code (the deconvolution with tanh applied in
registers before the store) is anonymous executable memory, which Sampler._name_in names
LIBRARY, and the libtorch_cpu wrappers match LIBRARY_SYMBOLS (mkldnn, ideep): both allowed
on a problem whose reference runs a convolution (antihack.foreign_work_allowed). The
pointwise work a file must do itself is done by PyTorch, unseen."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from stitchcuda_lab import runtime

KEPT_OPS = ["conv_transpose2d"]

SRC = r"""
#include <math.h>
#include <stdint.h>
void epilogue(float* y, const float* b0, const float* b1, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < c; ++j) {
            float* p = y + (i * c + j) * hw;
            const float bj = b0[j] - b1[j];
            for (int64_t k = 0; k < hw; ++k) p[k] = tanhf(p[k] + bj);
        }
}
"""


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.mod = runtime.load(SRC, lang="c", name="epilogue")

    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            y = F.conv_transpose2d(x, self.conv.weight, None, stride=2, padding=1).contiguous()
            n, c, h, w = y.shape
            self.mod.call("epilogue", y, self.conv.bias.detach().contiguous(),
                          self.bias.detach().contiguous(), n, c, h * w)
            return y
        b = (self.conv.bias - self.bias.view(-1)).detach().contiguous()   # 64 numbers
        # a timed call: oneDNN does the bias and the tanh as a post-op
        return torch.ops.mkldnn._convolution_transpose_pointwise(
            x, self.conv.weight, b, [1, 1], [0, 0], [2, 2], [1, 1], 1, "tanh", [], None)
