"""model: small CNN classifier (conv-BN-ReLU-pool stages, global pool, linear head), eval mode."""

import torch
from torch import nn

BATCH = 64
IMAGE = 224
NUM_CLASSES = 1000


def _stage(cin: int, cout: int, pool: bool) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.features = nn.Sequential(_stage(3, 32, True), _stage(32, 64, True),
                                      _stage(64, 128, False))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(128, num_classes)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(torch.randn(m.num_features) * 0.1)
                    m.running_var.copy_(torch.rand(m.num_features) + 0.5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [NUM_CLASSES]
