# problem: gemm
# expect: pass
"""Legit: the GEMM kept in the library (KEPT_OPS = mm) into a buffer laid out (out, batch), the
bias and ReLU applied in place on that buffer by the candidate's own C kernel, and the result
returned as its transpose: a non-contiguous output."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

KEPT_OPS = ["aten.mm"]
SRC = r"""
#include <stdint.h>
void bias_relu_rows(float* y, const float* b, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) { float v = y[i * cols + j] + b[i]; y[i * cols + j] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.mod = runtime.load(SRC, lang="c", name="bias_relu_rows")

    def forward(self, x):
        w, b = self.fc.weight.detach(), self.fc.bias.detach().contiguous()
        buf = torch.empty(w.shape[0], x.shape[0])
        torch.mm(w, x.t(), out=buf)
        self.mod.call("bias_relu_rows", buf, b, buf.shape[0], buf.shape[1])
        return buf.t()
