"""pointwise: ReLU over 1.6 billion elements."""

import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim) * 2 - 1]

def get_init_inputs():
    return []
