# problem: gemm
# expect: pass
"""Legit: the GEMM in the library as torch.mm (x @ W^T), the bias and ReLU fused in the
candidate's own C kernel, in place on the GEMM's fresh output. The reference's nn.Linear
runs addmm; mm is the same op family (antihack/aten: "a kept op stands for its family"), and a
candidate file may run library ops without declaring KEPT_OPS (antihack.find_fallback with
replaced=None allows LIBRARY). No KEPT_OPS line here, as an author who trusts that rule
would write it."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void bias_relu(float* y, const float* b, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) { float v = y[r * cols + c] + b[c]; y[r * cols + c] = v > 0.0f ? v : 0.0f; }
}
"""


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.mod = runtime.load(SRC, lang="c", name="bias_relu")

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.fc.weight.t())
        self.mod.call("bias_relu", y, self.fc.bias.contiguous(), y.shape[0], y.shape[1])
        return y
