"""Convolution problems: how precise the fp32 reference itself is, and what channels-last buys.

PyTorch runs fp32 convolutions on TF32 tensor cores by default (``cudnn.allow_tf32``), so the
"fp32" reference of a convolution problem carries TF32's rounding (10 mantissa bits). Another
algorithm, a channels-last layout among them, rounds differently. For each problem with a
convolution this prints, per layout:

  err_ref    largest |out - ref| / (atol + rtol |ref|), atol = rtol = 1e-4 (1 = the tolerance)
  err_strict the same against the forward with TF32 off (fp32 arithmetic throughout)
  norm       ||out - strict|| / ||ref - strict||: the layout's error in units of the reference's

and the eager times (CUDA events, L2 flushed, median) of NCHW and channels-last, each with
cuDNN's heuristics and with ``cudnn.benchmark``.

    python benchmarks/conv_numerics.py .kb/level1 .kb/level2 --out conv_numerics.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_precision import timed  # noqa: E402  (CUDA events, L2 flushed, median)


def load(path: Path):
    ns: dict = {"__name__": f"kb_{path.stem}"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def ratio(out, ref) -> float:
    d = (out.double() - ref.double()).abs()
    return float((d / (1e-4 + 1e-4 * ref.double().abs())).max())


def norm(a, b) -> float:
    import torch
    return float(torch.linalg.vector_norm((a.double() - b.double()).reshape(-1)))


def channels_last(t):
    import torch
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


def one(path: Path) -> dict:
    import torch
    ns = load(path)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).cuda()
    xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    cudnn = torch.backends.cudnn
    row: dict = {"problem": path.name}
    with torch.no_grad():
        ref = model(*xs)
        cudnn.allow_tf32 = False
        strict = model(*xs)
        cudnn.allow_tf32 = True
        torch.use_deterministic_algorithms(True, warn_only=True)
        det = model(*xs)
        torch.use_deterministic_algorithms(False)
        ref_err = norm(ref, strict)
        row["ref_vs_strict"] = ratio(ref, strict)
        row["det_vs_ref"] = ratio(det, ref)
        row["t_nchw"] = timed(lambda: model(*xs), 20)
        cudnn.benchmark = True
        row["t_nchw_bench"] = timed(lambda: model(*xs), 20)
        bench_out = model(*xs)
        row["nchw_bench_err_ref"] = ratio(bench_out, ref)
        row["nchw_bench_norm"] = norm(bench_out, strict) / ref_err if ref_err else 0.0
        cudnn.benchmark = False
        for p in model.parameters():   # 4-d and 5-d weights channels-last
            if p.dim() in (4, 5):
                p.data = channels_last(p.data)
        cxs = [channels_last(x) if isinstance(x, torch.Tensor) else x for x in xs]
        cl = model(*cxs)
        row["cl_err_ref"] = ratio(cl, ref)
        row["cl_err_strict"] = ratio(cl, strict)
        row["ref_err_strict"] = ratio(ref, strict)
        row["cl_norm"] = norm(cl, strict) / ref_err if ref_err else 0.0
        row["t_cl"] = timed(lambda: model(*cxs), 20)
        cudnn.benchmark = True
        row["t_cl_bench"] = timed(lambda: model(*cxs), 20)
        cudnn.benchmark = False
    return row


def run(folders: list[str], keep, one, out: str | None) -> list[dict]:
    """``one(path)`` for each problem file of ``folders`` that ``keep(path)`` accepts, a JSON
    line printed per problem as it is done (a failure is a row saying so)."""
    import torch
    rows = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.py")):
            if not keep(path):
                continue
            t0 = time.perf_counter()
            cudnn = torch.backends.cudnn
            saved = (cudnn.allow_tf32, cudnn.benchmark, torch.are_deterministic_algorithms_enabled())
            try:
                row = one(path)
            except Exception as e:  # noqa: BLE001  (a report: one problem's failure is a row)
                row = {"problem": path.name, "error": f"{type(e).__name__}: {e}"[:300]}
            finally:   # a problem that failed midway leaves the next one the defaults
                cudnn.allow_tf32, cudnn.benchmark = saved[:2]
                torch.use_deterministic_algorithms(saved[2])
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            torch.cuda.empty_cache()
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                              for k, v in row.items()}), flush=True)
    if out:
        Path(out).write_text(json.dumps(rows, indent=1))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--filter", default="onv")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    run(a.folders, lambda p: a.filter in p.read_text(), one, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
