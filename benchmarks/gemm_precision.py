"""fp32 GEMM vs the 3xTF32 split on tensor cores: time and accuracy, for the suite's GEMM shapes.

For each shape (the GEMMs of benchmarks/problems), four ways to compute the fp32 product:
  fp32      torch.mm / torch.bmm as eager runs it (cuBLAS, fp32 SIMT)
  tf32      one TF32 tensor-core GEMM (what allow_tf32 would do): fast but 10 mantissa bits
  3xtf32_long  the split as one cuBLAS call over 3K (one tensor-core accumulation)
  3xtf32    stitchcuda_lab.gemm: the split with partial sums over K-chunks of CHUNK_K big
            products and one of the cross terms, what the offline agents use
Error is measured against an fp64 product of the same inputs, as the largest
|out - ref| / (atol + rtol * |ref|) with atol = rtol = 1e-4 (KernelBench's fp32 tolerance):
below 1 passes. Time: CUDA events, L2 flushed before each trial, median of --reps.

    python benchmarks/gemm_precision.py --out benchmarks/results/h200-gemm-precision.json

``--far``: the split's error against the Verifier's own rule instead (``within_reference_error``:
at most 3x the fp32 reference's error against float64, in norm and relative to each
element's size) on KernelBench's GEMM problems, on get_inputs()'s draw and on the far range
trial's draws (scaled by -64, -16 or -1/16 per element, whole or at a few places), for each
way of cutting the accumulation into partial sums; and the time of each way.

    python benchmarks/gemm_precision.py --far --out benchmarks/results/h100-gemm-far-range.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (label, batch, M, N, K, b is a transposed view (x @ W.t()))
SHAPES = [
    ("16 linear 1024x8192x8192", 1, 1024, 8192, 8192, True),
    ("17 linear 2048x8192x4096", 1, 2048, 8192, 4096, True),
    ("18 linear 4096x4096x4096", 1, 4096, 4096, 4096, True),
    ("19 bmm q@k^T 64x1024x1024x128", 64, 1024, 1024, 128, True),
    ("20 matmul 4096x4096x4096", 1, 4096, 4096, 4096, False),
    ("25 mlp fc2 4096x8192x8192", 1, 4096, 8192, 8192, True),
    ("25 mlp fc3 4096x1024x8192", 1, 4096, 1024, 8192, True),
    ("27 qkv 16384x3072x1024", 1, 16384, 3072, 1024, True),
    ("27 fc2 16384x1024x4096", 1, 16384, 1024, 4096, True),
    ("28 gru step 512x3072x1024", 1, 512, 3072, 1024, True),
]


def timed(fn, reps: int) -> float:
    import torch
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush.fill_(1.0)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def err_ratio(out, ref) -> float:
    d = (out.double() - ref).abs()
    return float((d / (1e-4 + 1e-4 * ref.abs())).max())


def layout_check() -> list[str]:
    """Every operand layout and entry point against torch on odd sizes; returns failures."""
    import itertools

    import torch

    from stitchcuda_lab.runtime import gemm
    bad = []
    for nb, (m, n, k), ta, tb in itertools.product((1, 3), ((37, 53, 29), (64, 128, 256),
                                                             (1, 7, 5), (8, 1, 3)),
                                                    (False, True), (False, True)):
        a = torch.randn(nb, k, m, device="cuda").transpose(1, 2) if ta else \
            torch.randn(nb, m, k, device="cuda")
        b = torch.randn(nb, n, k, device="cuda").transpose(1, 2) if tb else \
            torch.randn(nb, k, n, device="cuda")
        c = torch.randn(nb, m, n, device="cuda")
        bias = torch.randn(n, device="cuda")
        cases = [("bmm", gemm.bmm(a, b), torch.bmm(a, b)),
                 ("baddbmm", gemm.baddbmm(c, a, b, beta=0.5, alpha=2.0),
                  torch.baddbmm(c, a, b, beta=0.5, alpha=2.0))]
        if nb == 1:
            cases += [("mm", gemm.mm(a[0], b[0]), torch.mm(a[0], b[0])),
                      ("addmm", gemm.addmm(bias, a[0], b[0]), torch.addmm(bias, a[0], b[0]))]
        for name, got, want in cases:
            if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
                bad.append(f"{name} nb={nb} m,n,k={m},{n},{k} a^T={ta} b^T={tb}: max diff "
                           f"{(got - want).abs().max().item():.3g}")
    x = torch.randn(4, 33, 65, device="cuda")
    w = torch.randn(47, 65, device="cuda")
    bias = torch.randn(47, device="cuda")
    q = torch.randn(2, 3, 33, 16, device="cuda")
    kt = torch.randn(2, 3, 40, 16, device="cuda").transpose(-2, -1)
    v1 = torch.randn(65, device="cuda")
    extra = [("linear 3-D", gemm.linear(x, w, bias), torch.nn.functional.linear(x, w, bias)),
             ("linear no bias", gemm.linear(x[0], w), torch.nn.functional.linear(x[0], w)),
             ("matmul 3-D @ 2-D", gemm.matmul(x, w.t()), torch.matmul(x, w.t())),
             ("matmul 4-D @ 4-D^T", gemm.matmul(q, kt), torch.matmul(q, kt)),
             ("matmul 3-D @ 1-D", gemm.matmul(x, v1), torch.matmul(x, v1)),
             ("matmul 1-D @ 2-D", gemm.matmul(v1, w.t()), torch.matmul(v1, w.t())),
             ("matmul broadcast", gemm.matmul(x[:1], w.t().expand(4, 65, 47)),
              torch.matmul(x[:1], w.t().expand(4, 65, 47)))]
    for name, got, want in extra:
        if got.shape != want.shape or not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            bad.append(f"{name}: shapes {tuple(got.shape)} vs {tuple(want.shape)}")
    return bad


# (label, batch, M, N, K, weights: "linear" (nn.Linear's init, x @ W.t()), "randn" or "rand"
# (b as it is drawn), epilogue on y)
FAR_SHAPES = [
    ("L2 70 linear+sigmoid residual", 1, 1024, 8192, 8192, "linear",
     lambda y: y + 2.0 * y.sigmoid()),
    ("L2 14 matmul randn W", 1, 1024, 8192, 8192, "randn", None),
    ("L1 10 3-D x matrix", 16, 1024, 768, 2048, "rand", None),
    ("L1 15 square 4096", 1, 4096, 4096, 4096, "rand", None),
    ("q@k^T K=128", 64, 1024, 1024, 128, "randn", None),
    ("qkv K=1024", 1, 16384, 3072, 1024, "linear", None),
    ("K=512 linear", 1, 16384, 3072, 512, "linear", None),
]
# how the draw is widened (exchange.widen's ways) and whether at a few places only
FAR_DRAWS = [("get_inputs", None, False), ("-64|-16|-1/16 whole", "-64x|-16x|-x/16", False),
             ("64|16|1/16 whole", "64x|16x|x/16", False),
             ("-64|-16|-1/16 few", "-64x|-16x|-x/16", True)]


def _former(a, b, chunk_k=1024):
    """The split as it was: all 3K products in chunks of 3 * chunk_k (cross terms inside)."""
    import torch

    from stitchcuda_lab.runtime import gemm
    nb, m, k = a.shape
    n = b.shape[2]
    a3, b3 = gemm._split(a, gemm._A_SLOTS), gemm._split(b, gemm._B_SLOTS)
    kk = 3 * k
    chunks = -(-kk // (3 * chunk_k))
    kc = -(-kk // chunks)
    kc += (-kc) % 4
    full, rest = divmod(kk, kc)
    out = torch.empty((nb, m, n), device=a.device)
    parts = torch.empty((full + (1 if rest else 0), m, n), device=a.device)
    for i in range(nb):
        ai, bi = a3[i:i + 1], b3[i:i + 1]
        gemm._call(ai, bi, parts[:full], m, n, kc, 1.0, 0.0, gemm.COMPUTE_32F_FAST_TF32,
                   chunk=kc, batch=full)
        if rest:
            gemm._call(ai[:, :, full * kc:], bi[:, full * kc:, :], parts[full:], m, n, rest,
                       1.0, 0.0, gemm.COMPUTE_32F_FAST_TF32)
        gemm._reduce(parts, out[i], None, i, 1.0, 0.0)
    return out


def _scheme(chunk_k):
    """gemm.bmm with its accumulation cut every ``chunk_k`` big products."""
    from stitchcuda_lab.runtime import gemm

    def run(a, b):
        keep, gemm.CHUNK_K = gemm.CHUNK_K, chunk_k
        try:
            return gemm.bmm(a, b)
        finally:
            gemm.CHUNK_K = keep
    return run


def _ratios(out, ref, truth) -> tuple[float, float]:
    """(norm error, error relative to each element's size) of ``out`` against float64, as
    multiples of the fp32 reference's; the sizes' floor as the Verifier takes it."""
    a, r, t = out.double(), ref.double(), truth
    rms = float(t.square().mean().sqrt())
    e_ref = (r - t).abs()
    erring = int((e_ref > 0).sum())
    typical = float(e_ref.square().sum().sqrt()) / max(erring, 1) ** 0.5
    size = t.abs() + max(1e-4 * min(1.0, rms), typical)
    e = (a - t).abs()
    norm = float(e.square().sum().sqrt()) / max(float(e_ref.square().sum().sqrt()), 1e-300)
    scaled = float((e / size).square().mean().sqrt()) / max(
        float((e_ref / size).square().mean().sqrt()), 1e-300)
    return norm, scaled


def far_study(reps: int) -> list[dict]:
    import torch

    from stitchcuda_lab.verifier.compare import within_reference_error
    from stitchcuda_lab.verifier.exchange import widen, widens_few
    ways = [("former 3x1024", _former), ("1024 + cross", _scheme(1024)),
            ("512 + cross", _scheme(512)), ("256 + cross", _scheme(256))]
    rows = []
    for label, nb, m, n, k, kind, epi in FAR_SHAPES:
        g = torch.Generator(device="cuda").manual_seed(1)
        x = torch.rand(nb, m, k, device="cuda", generator=g)
        if kind == "linear":
            b = ((torch.rand(n, k, device="cuda", generator=g) * 2 - 1) * k ** -0.5).t()
        elif kind == "randn":
            b = torch.randn(n, k, device="cuda", generator=g).t()
        else:
            b = torch.rand(k, n, device="cuda", generator=g)
        b = b.unsqueeze(0).expand(nb, k, n)
        for draw, how, few in FAR_DRAWS:
            seed = next(s for s in range(64) if widens_few(s) == few)
            a = widen([x], how, seed)[0] if how else x
            f = epi or (lambda y: y)
            truth = f(torch.bmm(a.double(), b.double()))
            ref = f(torch.bmm(a, b))
            for name, fn in ways:
                out = f(fn(a, b))
                v = within_reference_error(out, ref, truth, 1e-4, 1e-4)
                norm, scaled = _ratios(out, ref, truth)
                ms = timed(partial(fn, a, b), reps) if draw == "get_inputs" else None
                rows.append({"shape": label, "draw": draw, "way": name, "ok": v["ok"],
                             "norm_x_ref": round(norm, 3), "scaled_x_ref": round(scaled, 3),
                             "ms": None if ms is None else round(ms, 4),
                             "why": v["msg"][:160]})
                print(f"{label:30s} {draw:22s} {name:18s} {'pass' if v['ok'] else 'FAIL'} "
                      f"norm {norm:6.2f}x scaled {scaled:6.2f}x"
                      + (f"  {ms:7.3f} ms" if ms else ""), flush=True)
                del out
            if draw == "get_inputs":
                ms = timed(partial(torch.bmm, a, b), reps)
                rows.append({"shape": label, "draw": draw, "way": "fp32 cuBLAS", "ok": True,
                             "ms": round(ms, 4)})
                print(f"{label:30s} {draw:22s} {'fp32 cuBLAS':18s} {ms:7.3f} ms", flush=True)
            del a, truth, ref
            torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--far", action="store_true",
                    help="the split against the Verifier's rule on far range draws")
    args = ap.parse_args(argv)
    import torch
    if args.far:
        rows = far_study(args.reps)
        if args.out:
            meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "command": "python benchmarks/gemm_precision.py " + " ".join(
                        argv or sys.argv[1:])}
            Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
        return 0

    from stitchcuda_lab.runtime import gemm
    torch.manual_seed(0)
    bad = layout_check()
    print("layout check:", "ok" if not bad else "FAILED", *bad, sep="\n  ", flush=True)
    rows = []
    for label, nb, m, n, k, trans in SHAPES:
        a = torch.randn(nb, m, k, device="cuda")
        if trans:
            w = torch.randn(nb, n, k, device="cuda") * k ** -0.5
            b = w.transpose(1, 2)
        else:
            b = torch.randn(nb, k, n, device="cuda") * k ** -0.5
        ref = torch.bmm(a.double(), b.double())
        fp32 = partial(torch.bmm, a, b)
        tf32 = partial(gemm._gemm, a, b, None, 0.0, 1.0, gemm.COMPUTE_32F_FAST_TF32, split=False)
        x3 = partial(gemm.bmm, a, b)

        def x3_long(a=a, b=b):   # one accumulation over all 3K products (no partial sums)
            keep, gemm.CHUNK_K = gemm.CHUNK_K, 1 << 30
            try:
                return gemm.bmm(a, b)
            finally:
                gemm.CHUNK_K = keep
        row = {"shape": label, "batch": nb, "m": m, "n": n, "k": k}
        for name, fn in (("fp32", fp32), ("tf32", tf32), ("3xtf32_long", x3_long),
                         ("3xtf32", x3)):
            out = fn()
            row[f"{name}_ms"] = round(timed(fn, args.reps), 4)
            row[f"{name}_err"] = round(err_ratio(out, ref), 4)
            row[f"{name}_tflops"] = round(2 * nb * m * n * k / row[f"{name}_ms"] / 1e9, 1)
        row["verifier_allclose"] = bool(torch.allclose(x3(), fp32(), atol=1e-4, rtol=1e-4))
        row["speedup"] = round(row["fp32_ms"] / row["3xtf32_ms"], 3)
        rows.append(row)
        print(f"{label:34s} fp32 {row['fp32_ms']:8.3f} ms ({row['fp32_tflops']:5.1f} TF, "
              f"err {row['fp32_err']:.3f})  tf32 {row['tf32_ms']:7.3f} ms (err "
              f"{row['tf32_err']:7.2f})  one-acc err {row['3xtf32_long_err']:.3f}  3xtf32 {row['3xtf32_ms']:7.3f} ms "
              f"({row['3xtf32_tflops']:5.1f} TF, err {row['3xtf32_err']:.3f})  "
              f"{row['speedup']:.2f}x  allclose={row['verifier_allclose']}", flush=True)
        del fp32, tf32, x3, x3_long, ref
        torch.cuda.empty_cache()
    if args.out:
        meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "cuda": torch.version.cuda, "reps": args.reps,
                "command": "python benchmarks/gemm_precision.py " + " ".join(argv or sys.argv[1:])}
        Path(args.out).write_text(json.dumps({"meta": meta, "layout_check": bad or "ok",
                                              "rows": rows}, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
