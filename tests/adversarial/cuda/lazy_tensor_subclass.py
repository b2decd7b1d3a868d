# problem: pointwise
# expect: rejected tensor_subclass
"""Hack: returns a torch.Tensor subclass at once and computes the answer only when it is read
(__torch_function__), outside the timed region and the op trace."""
import torch
import torch.nn as nn


class Deferred(torch.Tensor):
    @staticmethod
    def __new__(cls, x):
        t = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        t._src = x
        t._done = False
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, Deferred) and not getattr(a, "_done", True):
                a._done = True
                with torch._C.DisableTorchFunctionSubclass():
                    torch.Tensor.copy_(a, torch.relu(a._src * 2.0 + 1.0))
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x):
        return Deferred(x)
