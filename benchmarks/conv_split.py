"""Convolutions at fp32 accuracy on TF32 tensor cores: the 3xTF32 split by channel concatenation.

Where cuDNN runs an fp32 convolution in fp32 arithmetic (no TF32: small input channel counts,
NCHW), the reference is exact to 1e-4 and a TF32 convolution (what channels-last picks) is not.
The split writes x = x_hi + x_lo and w = w_hi + w_lo with TF32 parts, and computes
conv(x_hi, w_hi) + conv(x_lo, w_hi) + conv(x_hi, w_lo) as ONE convolution over three times the
input channels: cat([x_hi, x_lo, x_hi]) against cat([w_hi, w_hi, w_lo]). With few input
channels, a convolution's cost is mostly writing its output, so the wider reduction is cheap.

For each convolution problem this prints the times (CUDA events, L2 flushed, median) of the
reference's convolution, channels-last TF32, channels-last with TF32 off, and the split
(preparing the input included), and each one's largest error against fp32 arithmetic in units
of the tolerance (atol = rtol = 1e-4; below 1 passes). ``--compile`` also lists the kernels of
torch.compile's forward (what Inductor runs for the problem).

    python benchmarks/conv_split.py .kb/level1 .kb/level2 --out conv_split.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conv_numerics import channels_last, load, ratio, run  # noqa: E402
from gemm_precision import timed  # noqa: E402


def tf32_split(t):
    import torch
    i = t.contiguous().view(torch.int32)
    hi = ((i + 0x1000) & ~0x1FFF).view(torch.float32)
    return hi, t - hi


def first_conv(model):
    import torch.nn as nn
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
            return m
    return None


def conv_fn(m):
    import torch.nn.functional as F
    import torch.nn as nn
    kw = dict(stride=m.stride, padding=m.padding, dilation=m.dilation, groups=m.groups)
    if isinstance(m, nn.ConvTranspose2d):
        return lambda x, w, b: F.conv_transpose2d(x, w, b, output_padding=m.output_padding, **kw)
    if isinstance(m, nn.ConvTranspose3d):
        return lambda x, w, b: F.conv_transpose3d(x, w, b, output_padding=m.output_padding, **kw)
    if isinstance(m, nn.Conv3d):
        return lambda x, w, b: F.conv3d(x, w, b, **kw)
    return lambda x, w, b: F.conv2d(x, w, b, **kw)


def one(path: Path, with_compile: bool) -> dict:
    import torch
    import torch.nn as nn
    ns = load(path)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).cuda()
    m = first_conv(model)
    if m is None:
        return {"problem": path.name, "skip": "no convolution"}
    x = [t for t in ns["get_inputs"]() if isinstance(t, torch.Tensor)][0].cuda()
    fn = conv_fn(m)
    w, b = m.weight.detach(), (m.bias.detach() if m.bias is not None else None)
    transposed = isinstance(m, (nn.ConvTranspose2d, nn.ConvTranspose3d))
    row: dict = {"problem": path.name, "conv": type(m).__name__, "groups": m.groups,
                 "weight": list(w.shape), "input": list(x.shape)}
    cudnn = torch.backends.cudnn
    with torch.no_grad():
        ref = fn(x, w, b)
        cudnn.allow_tf32 = False
        strict = fn(x, w, b)
        row["t_nchw_fp32"] = timed(lambda: fn(x, w, b), 20)
        xc, wc = channels_last(x), channels_last(w)
        row["t_cl_fp32"] = timed(lambda: fn(xc, wc, b), 20)
        row["err_cl_fp32"] = ratio(fn(xc, wc, b), strict)
        cudnn.allow_tf32 = True
        row["err_ref"] = ratio(ref, strict)
        row["t_ref"] = timed(lambda: fn(x, w, b), 20)
        row["t_cl_tf32"] = timed(lambda: fn(xc, wc, b), 20)
        row["err_cl_tf32"] = ratio(fn(xc, wc, b), strict)
        if m.groups == 1:
            whi, wlo = tf32_split(w)
            cat_dim = 0 if transposed else 1
            w3 = channels_last(torch.cat([whi, whi, wlo], dim=cat_dim))

            def split():
                xhi, xlo = tf32_split(x)
                return fn(channels_last(torch.cat([xhi, xlo, xhi], dim=1)), w3, b)
            out = split()
            row["err_split"] = ratio(out, strict)
            row["t_split"] = timed(split, 20)
            xhi, xlo = tf32_split(x)
            x3 = channels_last(torch.cat([xhi, xlo, xhi], dim=1))
            row["t_split_conv_only"] = timed(lambda: fn(x3, w3, b), 20)
            del x3, out
        if with_compile:
            from torch.profiler import ProfilerActivity, profile
            cm = torch.compile(model)
            xs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ns["get_inputs"]()]
            t0 = time.perf_counter()
            cm(*xs)
            torch.cuda.synchronize()
            row["compile_s"] = round(time.perf_counter() - t0, 1)
            row["t_compile"] = timed(lambda: cm(*xs), 20)
            row["t_eager"] = timed(lambda: model(*xs), 20)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                cm(*xs)
                torch.cuda.synchronize()
            ks = sorted(((e.device_time_total, e.key) for e in prof.key_averages()
                         if e.device_time_total > 0), reverse=True)[:6]
            row["compile_kernels"] = [f"{t / 1e3:.3f} ms {n[:90]}" for t, n in ks]
            row["err_compile"] = ratio(cm(*xs), model(*xs))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--filter", default="")
    ap.add_argument("--compile", default="", help="problems (substrings) to compile and list")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    names = [c for c in a.compile.split(",") if c]
    run(a.folders, lambda p: "onv" in p.read_text() and a.filter in p.name,
        lambda p: one(p, any(c in p.name for c in names)), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
