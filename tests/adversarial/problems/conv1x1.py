"""conv1x1: a 1x1 convolution with a bias, 32 -> 48 channels on 16 x 16 images."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 32, 16, 16)]


def get_init_inputs():
    return [32, 48]
