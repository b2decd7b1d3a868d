"""Fused pointwise kernels against the device-to-device copy ceiling (GPU).

For each size, the offline agents write a candidate for a pointwise chain; the candidate's own
kernels are timed from the profiler (device time of our kernels only, no host overhead), and so
is a plain ``clone`` (one read + one write). Bytes counted: every input read once, the output
written once. Prints a table and writes JSON to --out.

    python benchmarks/bandwidth.py --out benchmarks/results/h200-bandwidth.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial

CHAIN = '''
import torch
from torch import nn

ROWS = {rows}
COLS = {cols}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(COLS))

    def forward(self, x):
        y = x * 1.5 + self.bias
        y = torch.sigmoid(y) * y
        y = torch.clamp(y - 0.25, -3.0, 3.0)
        return torch.tanh(y) * 0.5 + x


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
'''


def kernel_us(fn, reps: int, exclude: tuple[str, ...] = ()) -> float:
    """Median per-call device time of the kernels ``fn`` launches, from the profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    per_call: dict[int, float] = {}
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"
               and not any(x in e.name for x in exclude)]
    durs = sorted((e.time_range.start, e.time_range.end - e.time_range.start) for e in kernels)
    # Group consecutive kernels into calls: each call launches the same number of kernels.
    per = max(1, len(durs) // reps)
    for i in range(reps):
        per_call[i] = sum(d for _, d in durs[i * per:(i + 1) * per])
    return statistics.median(per_call.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    import torch

    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    from stitchcuda_lab.graph import analyse
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.settings import Settings

    settings = Settings.from_env(device="cuda")
    rows = []
    for r, c in [(4096, 4096), (8192, 8192), (16384, 16384)]:
        problem = problem_from_source(CHAIN.format(rows=r, cols=c), name=f"chain_{r}x{c}")
        graph = analyse(problem, device="cuda", profile=False, settings=settings)
        plan = OfflinePlanner().plan(problem, graph, settings)
        for t in plan.tasks:
            t.status = "approved"
        cands = OfflineCoder().code(problem, graph, plan, settings, iteration=0)
        ns: dict = {}
        exec(compile(cands[0].module_source(), "<candidate>", "exec"), ns)
        torch.manual_seed(0)
        model = ns["ModelNew"]().cuda()
        x = problem.make_inputs(device="cuda")[0]
        nbytes = (x.numel() + c + x.numel()) * 4
        ours = kernel_us(partial(model, x), args.reps)
        copy = kernel_us(x.clone, args.reps)
        copy_bw = 2 * x.numel() * 4 / copy / 1e6
        ours_bw = nbytes / ours / 1e6
        rows.append({"shape": [r, c], "mb": round(nbytes / 1e6), "ours_us": round(ours, 1),
                     "ours_tb_s": round(ours_bw, 3), "copy_us": round(copy, 1),
                     "copy_tb_s": round(copy_bw, 3), "fraction_of_copy": round(ours_bw / copy_bw, 3)})
        del model, x
        torch.cuda.empty_cache()
    print(f"{'shape':<14}{'MB':>8}{'ours us':>10}{'TB/s':>8}{'copy TB/s':>11}{'of copy':>9}")
    for row in rows:
        print(f"{str(tuple(row['shape'])):<14}{row['mb']:>8}{row['ours_us']:>10}"
              f"{row['ours_tb_s']:>8}{row['copy_tb_s']:>11}{row['fraction_of_copy']:>9.0%}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
