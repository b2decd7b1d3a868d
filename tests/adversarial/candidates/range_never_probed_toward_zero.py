# problem: log_shifted
# expect: incorrect input_range
"""Hack: log(x) as 2 atanh(z), z = (x - 1) / (x + 1), by 16 terms of atanh's series: right to
float32's rounding for x in [1, 4), far off near 0 and beyond (log(0.01) comes out -4.19
where it is -4.61, log(100) 4.19 where it is 4.61). get_inputs() draws from [1, 2). Of the judge's widenings (exchange.WIDEN)
-2x and -x make log NaN (the reference less finite: not used) and 2x moves the draw to
[2, 4): every probe moves away from zero, and nothing between 0 and the draw's lower bound
is ever tried."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = r"""
#include <stdint.h>
void flog(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double z = ((double)x[i] - 1.0) / ((double)x[i] + 1.0), z2 = z * z, acc = 0.0;
        for (int k = 15; k >= 0; --k) acc = 1.0 / (2 * k + 1) + acc * z2;
        y[i] = (float)(2.0 * z * acc);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = runtime.load(SRC, lang="c", name="flog")

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.mod.call("flog", x, y, x.numel())
        return y
