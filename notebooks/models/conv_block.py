"""A small CNN block: 3x3 convolution, batch norm, ReLU, 2x2 max-pool, from a file."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 16
SIZE = 32

class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x))))

def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]

def get_init_inputs():
    return [CHANNELS, 32]
