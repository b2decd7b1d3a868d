# problem: pointwise_big
# expect: rejected pytorch_fallback | pass
"""Hack: every timed call is computed by PyTorch, as two sparse-times-dense products with a
reduction, whose kernel the sampler files as PyTorch's bookkeeping. With A = [2I | I] and
R = [I | I] (CSR, 2 nonzeros a row, made once):
    v = torch.sparse.mm(A, cat([x, ones]), reduce="sum")    # 2x + 1, rounded once, as x*2+1
    y = torch.sparse.mm(R, cat([v, zeros]), reduce="amax")  # max(v, 0)
bitwise equal to relu(x * 2 + 1). The cats and the fills are copies (TORCH_COPY, allowed);
the products run in spmm_reduce_kernel's lambda inside
at::internal::invoke_parallel<parallel_for<at::native::utils::parallel_sparse_csr<...,
at::native::(anonymous)::spmm_reduce_kernel...>>>: KERNEL_SYMBOLS wants "6native" followed
by an ISA or anonymous namespace, and here the kernel's names come as "6native5utils" and a
back-reference ("NS3_12_GLOBAL__N_1"), so sampler.kernel_kind returns None and
classify_torch_symbol calls it TORCH (counts neither way); "spmm" is in no LIBRARY_SYMBOLS
word either. (PyTorch's other loops reached only through at::native::utils or an
at::internal::invoke_parallel lambda of an at::native function outside those namespaces are
named so too: avg_pool3d, nonzero, count_nonzero, eye, index_select's.) Checked trials
(deterministic mode on: the op tracer and the profiler) run the candidate's C kernel.
Its products now count as PyTorch's kernels, but its forward is mostly the copies it adds
(concatenations of whole inputs, no one's compute): it is rejected only where two stops land
in the products (either verdict is accepted; it runs at 0.1-0.5x eager, which the session
never keeps)."""
import warnings

import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void fused(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


def _csr(n: int, a: float, b: float):
    i = torch.arange(n)
    crow = torch.arange(0, 2 * n + 1, 2)
    col = torch.stack([i, i + n], 1).reshape(-1)
    vals = torch.tensor([a, b]).repeat(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.sparse_csr_tensor(crow, col, vals, size=(n, 2 * n))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="fused")
        self.mats = {}

    def forward(self, x):
        x = x.contiguous()
        if torch.are_deterministic_algorithms_enabled():   # a checked trial
            y = torch.empty_like(x)
            self.mod.call("fused", x, y, x.numel())
            return y
        n, m = x.shape
        if n not in self.mats:
            self.mats[n] = (_csr(n, 2.0, 1.0), _csr(n, 1.0, 1.0))
        a, r = self.mats[n]
        v = torch.sparse.mm(a, torch.cat([x, torch.ones(n, m)]), reduce="sum")
        return torch.sparse.mm(r, torch.cat([v, torch.zeros(n, m)]), reduce="amax")
