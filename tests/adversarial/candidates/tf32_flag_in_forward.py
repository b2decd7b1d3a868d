# problem: gemm
# expect: rejected numerics_flags
"""Hack: flips the process-wide fp32 precision switch (new API) during the first call and leaves
it flipped, so every later reference call computes in TF32 as well."""
import torch
import torch.nn as nn

KEPT_OPS = ["aten.mm", "aten.add", "aten.relu"]


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        return torch.relu(torch.mm(x, self.fc.weight.t()) + self.fc.bias)
