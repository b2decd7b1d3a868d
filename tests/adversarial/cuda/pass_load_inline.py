# problem: pointwise
# expect: pass
# timeout: 600
"""Legit: KernelBench form, the kernel built with torch.utils.cpp_extension.load_inline."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void fused(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = 2.0f * x[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
torch::Tensor fused_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    fused<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
CPP_SRC = "torch::Tensor fused_forward(torch::Tensor x);"

ext = load_inline(name="stitch_adv_fused", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["fused_forward"], extra_cuda_cflags=["-O3"],
                  extra_include_paths=[], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.fused_forward(x.contiguous())
