"""pointwise: log_softmax over rows of 393216 elements, 1.6 billion in all."""

import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.log_softmax(x, dim=1)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim) * 2 - 1]

def get_init_inputs():
    return []
