"""normalised_mean: the mean of each sample's group-normalised values (KernelBench's
Conv3d_GroupNorm_Mean without the convolution). In exact arithmetic every output is 0, so the
fp32 reference's outputs are rounding noise, about 1e-8, and another order of the same sums
gives other noise: no tolerance relative to the outputs' size can be met, and an output is
judged by its distance from the float64 result (compare.NOISE_SHARE)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.group_norm(x, 4).mean(dim=(1, 2))


def get_inputs():
    return [torch.randn(64, 8, 4096) * 3 + 1]


def get_init_inputs():
    return []
