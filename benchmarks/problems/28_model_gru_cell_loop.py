"""model: GRU recurrence unrolled over time steps with nn.GRUCell, all hidden states returned."""

import torch
from torch import nn

STEPS = 64
BATCH = 512
INPUT = 1024
HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        h = h0
        outputs = []
        for t in range(x.shape[0]):
            h = self.cell(x[t], h)
            outputs.append(h)
        return torch.stack(outputs)


def get_inputs():
    return [torch.randn(STEPS, BATCH, INPUT), torch.randn(BATCH, HIDDEN)]


def get_init_inputs():
    return [INPUT, HIDDEN]
