"""gemm: batched matmul (scores = q @ k^T * scale) followed by softmax over the last dim."""

import torch
from torch import nn

BATCH = 64
SEQ = 1024
HEAD_DIM = 128


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HEAD_DIM), torch.randn(BATCH, SEQ, HEAD_DIM)]


def get_init_inputs():
    return [HEAD_DIM]
