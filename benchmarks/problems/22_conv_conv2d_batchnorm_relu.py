"""conv: Conv2d (no bias) followed by BatchNorm2d in eval mode and ReLU."""

import torch
from torch import nn

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128
KERNEL = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():  # trained-looking statistics so the folding matters
            self.bn.running_mean.copy_(torch.randn(out_channels) * 0.1)
            self.bn.running_var.copy_(torch.rand(out_channels) * 0.5 + 0.5)
            self.bn.weight.copy_(torch.rand(out_channels) + 0.5)
            self.bn.bias.copy_(torch.randn(out_channels) * 0.1)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
