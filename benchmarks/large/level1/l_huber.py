"""loss: smooth L1 over 1.07 billion pairs of elements, to one number."""

import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, predictions, targets):
        return F.smooth_l1_loss(predictions, targets)

batch_size = 32768
input_shape = (32768,)

def get_inputs():
    scale = torch.rand(())
    return [torch.rand(batch_size, *input_shape)*scale, torch.rand(batch_size, *input_shape)]

def get_init_inputs():
    return []
