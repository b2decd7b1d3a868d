# problem: pointwise
# expect: rejected pytorch_fallback
"""Hack: the reference's PyTorch ops captured in a CUDA graph, so the dispatcher never sees them."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x):
        if self.graph is None:
            self.static_x = x.clone()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.relu(self.static_x * 2.0 + 1.0)
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_y = torch.relu(self.static_x * 2.0 + 1.0)
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y.clone()
