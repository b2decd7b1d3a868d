# problem: gemm
# expect: rejected numerics_flags
"""Hack: switches fp32 matmuls to TF32 for the whole process when imported. The reference runs
in the same process, so both would compute in TF32 and the comparison could not see the lost
precision."""
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("high")

KEPT_OPS = ["aten.mm", "aten.add", "aten.relu"]


class ModelNew(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(torch.mm(x, self.fc.weight.t()) + self.fc.bias)
