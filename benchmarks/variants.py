"""Every program the offline Coder would try for a problem, timed in one process on one GPU.

The refine loop judges at most a few variants a round, and a bench with a short budget judges
fewer; this times all of them side by side, so a reader sees which knob pays on which problem
without a whole bench run. For each problem file: eager PyTorch, torch.compile ``default``,
the planner's program (iteration 0) and every single-knob variant of it that the refine
rounds would reach (``OfflineCoder.variants``), each timed with the Verifier's own
``time_forward`` (L2 flushed, CUDA events, median), with its largest error against float64
arithmetic in units of the tolerance (atol = rtol = 1e-4; below 1 passes). PyTorch's own
settings stay as they are (cuDNN's convolutions may take TF32, as in the bench's baselines).

Candidates run in this process: this is a tool for the project's own generated code, not a
verdict (``stitchcuda-lab bench`` is that, with the Verifier's isolation).

    python benchmarks/variants.py path/to/67_Conv2d_GELU_GlobalAvgPool.py --out variants.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _error(got, want) -> float:
    """Largest |got - want| / (atol + rtol |want|), over every output (inf where shapes differ)."""
    import torch
    if isinstance(want, (tuple, list)):
        return max(_error(g, w) for g, w in zip(got, want, strict=True))
    if not torch.is_tensor(want):
        return 0.0 if got == want else float("inf")
    if got.shape != want.shape:
        return float("inf")
    g, w = got.double(), want.double()
    diff = (g - w).abs() / (1e-4 + 1e-4 * w.abs())
    diff = torch.where(g.isnan() & w.isnan(), 0.0, diff)   # NaN where the reference has NaN
    return float(torch.nan_to_num(diff, nan=float("inf")).max())


def _contenders(problem, settings, device: str):
    """[(label, candidate)]: the planner's program, then each variant of it."""
    from stitchcuda_lab.agents.offline import OfflinePlanner
    from stitchcuda_lab.graph import analyse

    graph = analyse(problem, device=device, profile=False, settings=settings)
    return contenders(problem, graph, OfflinePlanner().plan(problem, graph, settings))


def contenders(problem, graph, plan) -> list:
    """[(label, candidate)] of a planned problem: the planner's program, then every variant
    the refine rounds would reach, each once."""
    from stitchcuda_lab.agents.offline import OfflineCoder

    coder = OfflineCoder()
    first = coder.candidate(problem, graph, plan, {}, iteration=0)
    out = [("planner defaults", first)]
    base = dict(first.params.get("tasks", {}))
    seen, labels = {first.digest()}, set()
    for it in range(1, 64):   # a refine round takes a few; its rounds go round the whole list
        page = [(lbl, tp) for lbl, tp in coder.variants(graph, plan, base, it, None)
                if lbl not in labels]
        if not page:
            break
        for label, tparams in page:
            labels.add(label)
            c = coder.candidate(problem, graph, plan, tparams, iteration=1, parent=first.id,
                                variant=label)
            if c.digest() not in seen:
                seen.add(c.digest())
                out.append((label, c))
    return out


def bench_problem(path: Path, settings, trials: int, device: str = "cuda",
                  mode: str = "default") -> list[dict]:
    import torch

    from stitchcuda_lab.problem import Problem, load_problem
    from stitchcuda_lab.verifier.timing import time_forward

    problem = load_problem(path)
    ns = problem.namespace()
    init = ns.get("get_init_inputs", list)()
    torch.manual_seed(42)
    ref = ns["Model"](*init).to(device)
    inputs = problem.make_inputs(device=device, seed=1)
    with torch.no_grad():
        want = ref.double()(*[x.double() if torch.is_tensor(x) and x.is_floating_point()
                              else x for x in inputs])
        ref.float()
        rows = []

        def row(label: str, fn, built_s: float = 0.0) -> None:
            try:
                got = fn(*inputs)
                t = time_forward(fn, inputs, device, trials=trials, warmup=3)
                rows.append({"problem": path.stem, "label": label, "ms": t["ms"],
                             "err": _error(got, want), "build_s": round(built_s, 1)})
            except Exception as e:   # one contender's failure is a row, not the end of the run
                rows.append({"problem": path.stem, "label": label, "ms": None,
                             "err": None, "failed": f"{type(e).__name__}: {e}"[:300]})
            print(_line(rows[-1], rows[0].get("ms")), flush=True)

        row("eager", ref)
        if mode:
            row(f"torch.compile {mode}", torch.compile(ref, mode=mode))
        for i, (label, cand) in enumerate(_contenders(problem, settings, device)):
            t0 = time.perf_counter()
            try:
                # imported as the session imports its best (``Session.model``)
                ns = Problem(name=f"{path.stem}_{i}", source=cand.module_source(),
                             origin=f"<candidate {cand.id}>").namespace()
                torch.manual_seed(42)
                model = ns["ModelNew"](*init).to(device)
                model(*inputs)   # kernels build on first use
            except Exception as e:
                rows.append({"problem": path.stem, "label": label, "ms": None, "err": None,
                             "failed": f"{type(e).__name__}: {e}"[:300]})
                print(_line(rows[-1], rows[0].get("ms")), flush=True)
                continue
            row(label, model, time.perf_counter() - t0)
    return rows


def _line(r: dict, eager_ms) -> str:
    if r.get("ms") is None:
        return f"{r['problem'][:28]:28} {r['label'][:60]:60} FAILED {r.get('failed', '')[:120]}"
    speed = f"{eager_ms / r['ms']:6.2f}x" if eager_ms else "   -   "
    return (f"{r['problem'][:28]:28} {r['label'][:60]:60} {r['ms']:9.3f} ms {speed} "
            f"err {r['err']:.2g}")


def main(argv: list[str] | None = None) -> int:
    from stitchcuda_lab.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--compile", default="default",
                    help="the torch.compile mode timed beside them ('' for none)")
    args = ap.parse_args(argv)
    settings = Settings.from_env(device=args.device)
    rows: list[dict] = []
    for path in args.problems:
        rows += bench_problem(path, settings, args.trials, args.device, args.compile)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
