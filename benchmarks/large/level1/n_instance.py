"""norm: InstanceNorm2d over 112x64 planes of 512x512 (7.5 GB)."""

import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)
    def forward(self, x):
        return self.inorm(x)

batch_size = 112
features = 64
dim1 = 512
dim2 = 512

def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]

def get_init_inputs():
    return [features]
