# problem: pointwise
# expect: rejected protocol_tampering | timeout
# timeout: 20
"""Fault: write a frame header on the sandbox's reply pipe that promises 64 MB (the largest a
frame may be) and never send the body: the judge waits for the rest of the frame."""
import os
import struct
import sys

import torch.nn as nn

WFD = int(sys.argv[3])   # python -m stitchcuda_lab.verifier.sandbox DEVICE RFD WFD
os.write(WFD, struct.pack("<Q", 64 * 1024 * 1024) + b'{"outputs": [')


class ModelNew(nn.Module):
    def forward(self, x):
        return x
