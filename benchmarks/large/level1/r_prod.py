"""reduction: product over the middle dim of 128x4096x4095."""

import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
    def forward(self, x):
        return torch.prod(x, dim=self.dim)

batch_size = 128
dim1 = 4096
dim2 = 4095

def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]

def get_init_inputs():
    return [1]
