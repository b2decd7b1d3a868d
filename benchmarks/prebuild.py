"""When building several candidates side by side pays: K candidates verified one after another,
against the same K built side by side first (verifier/prebuild.py) and then verified.

Each candidate is verify_latency.py's one-kernel candidate with a kernel of its own (a new
cache key: a real build). ``--pad N`` adds N unused functions to every kernel, so that its
build takes longer, as a large generated kernel's does; the phase's own cost (a process, the
problem and the import per candidate) is the same either way. Both arms run in one worker, in
turns, each on fresh kernels, after one warm-up verdict.

  python benchmarks/prebuild.py --device cpu --pad 0 1500 --out benchmarks/results/cpu-prebuild.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verify_latency import C_CANDIDATE, CUDA_CANDIDATE, PROBLEM  # noqa: E402


def candidate(cuda: bool, tag: str, pad: int) -> str:
    if cuda:
        extra = "\n".join(f'extern "C" __global__ void pad_{i}(float* a) '
                          f'{{ a[threadIdx.x] = a[threadIdx.x] * {i}.0f + 1.0f; }}'
                          for i in range(pad))
        return CUDA_CANDIDATE.format(edit=tag).replace("// edit", extra + "\n// edit")
    extra = "\n".join(f"float pad_{i}(const float* a, int n) {{ float s = 0; "
                      f"for (int k = 0; k < n; ++k) s += a[k] * a[k] * {i}.0f; return s; }}"
                      for i in range(pad))
    return C_CANDIDATE.format(edit=tag).replace("/* edit", extra + "\n/* edit")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("-k", type=int, default=4, help="candidates per iteration")
    ap.add_argument("--pad", type=int, nargs="+", default=[0, 1500],
                    help="unused functions added to each kernel (one run per value)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from stitchcuda_lab.verifier.options import VerifyOptions
    from stitchcuda_lab.verifier.worker import Worker, resolve_device
    device = resolve_device(args.device)
    cuda = device.startswith("cuda")
    problem = PROBLEM.format(rows=4096 if cuda else 256, cols=4096 if cuda else 256)
    options = VerifyOptions(trials=5, timing_trials=20, warmup=3, compile_modes="",
                            profile=False)
    stamp, runs = int(time.time() * 1000), []
    with Worker(device, cache_dir=tempfile.mkdtemp(prefix="stitch_prebuild_")) as w:
        w.start()
        w.verify(problem, candidate(cuda, f"{stamp}_warm", 0), replaced=None, options=options)
        for pad in args.pad:
            for rep in range(args.repeats):
                for arm in ("one_after_another", "side_by_side"):
                    srcs = [candidate(cuda, f"{stamp}_{pad}_{rep}_{arm}_{i}", pad)
                            for i in range(args.k)]
                    t0 = time.perf_counter()
                    built = (w.prebuild(problem, srcs, options=options) if arm == "side_by_side"
                             else [])
                    t1 = time.perf_counter()
                    vs = [w.verify(problem, s, replaced=None, options=options) for s in srcs]
                    t2 = time.perf_counter()
                    runs.append({"pad": pad, "repeat": rep, "arm": arm,
                                 "prebuild_s": round(t1 - t0, 3), "verify_s": round(t2 - t1, 3),
                                 "total_s": round(t2 - t0, 3),
                                 "statuses": [v.status for v in vs],
                                 "build_ms": [round(v.timings.get("build", 0.0)) for v in vs],
                                 "prebuilt_build_ms": [round(b.get("build_ms", 0.0))
                                                       for b in built]})
    print(f"{'pad':>5} {'build ms':>9} {'one after another s':>20} {'side by side s':>15} "
          f"{'ratio':>6}")
    summary = []
    for pad in args.pad:
        one = [r for r in runs if r["pad"] == pad and r["arm"] == "one_after_another"]
        two = [r for r in runs if r["pad"] == pad and r["arm"] == "side_by_side"]
        a = statistics.median(r["total_s"] for r in one)
        b = statistics.median(r["total_s"] for r in two)
        build = statistics.median(x for r in one for x in r["build_ms"])
        summary.append({"pad": pad, "build_ms": build, "one_after_another_s": a,
                        "side_by_side_s": b, "ratio": round(a / b, 2)})
        print(f"{pad:>5} {build:>9.0f} {a:>20.2f} {b:>15.2f} {a / b:>6.2f}")
    ok = all(s == "pass" for r in runs for s in r["statuses"])
    if args.out:
        Path(args.out).write_text(json.dumps({
            "device": device, "host": platform.node(), "k": args.k, "summary": summary,
            "runs": runs, "all_passed": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
