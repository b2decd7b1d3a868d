"""conv: Conv2d, GELU, 2x2 average pooling and a global mean over the spatial dims."""

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 64
IN_CHANNELS = 32
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128
KERNEL = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.avg_pool2d(F.gelu(self.conv(x)), kernel_size=2)
        return y.mean(dim=(2, 3))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
