"""Where the time of one forward goes: eager, torch.compile and the offline candidate (GPU).

For each problem and each contender:
- ``ms``: the Verifier's protocol (L2 flush, start event, forward, device-wide sync, end event;
  median of trials);
- ``kernel_ms``: the summed device time of the kernels the forward launched (torch.profiler);
- ``host_ms``: the host time to issue the forward, without waiting for the GPU.

``ms - kernel_ms`` is launch latency, host work and idle gaps. ``floor`` is the protocol time of
one tiny torch op, the fixed cost every contender pays. ``--variant NAME:JSON`` adds a
candidate with those launch parameters on every kernel task (e.g. ``u1:{"unroll": 1}``);
its ``program`` key sets the whole program's (``cl:{"program": {"channels_last": true}}``).
``--kernels N`` lists each contender's N longest kernels: where a loss to torch.compile comes
from (a layout copy, an unfused epilogue, another convolution algorithm).

    python benchmarks/breakdown.py benchmarks/problems --filter '^(0[1-9]|1[0-2])_' \\
        --out benchmarks/results/h200-breakdown.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEV = "cuda"   # --device cpu: a dry run of the script itself (no kernel times there)


def _kernel_ms(fn, args, reps: int = 3) -> tuple[float, list]:
    """(median summed device ms of one forward, [(kernel name, ms)] of the last one, longest
    first: where a contender's time goes, kernel by kernel)."""
    from stitchcuda_lab import trace as trace_mod
    from stitchcuda_lab.verifier.profile import profile_forward
    out, per = [], {}
    for _ in range(reps):
        tr = profile_forward(fn, args, DEV)
        per = {}
        for e in trace_mod.load(tr):
            if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"):
                name = str(e.get("name", "?"))[:90]
                per[name] = per.get(name, 0.0) + float(e.get("dur", 0.0)) / 1e3
        out.append(sum(per.values()))
    top = sorted(per.items(), key=lambda kv: -kv[1])
    return statistics.median(out), [(k, round(v, 4)) for k, v in top]


def _sync() -> None:
    import torch
    if DEV == "cuda":
        torch.cuda.synchronize()


def _host_ms(fn, args, reps: int = 20) -> float:
    out = []
    for _ in range(reps):
        _sync()
        t0 = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - t0) * 1e3)
    _sync()
    return statistics.median(out)


def _candidate(prob, path: Path, overrides: dict, workdir: Path, tag: str):
    """ModelNew class of the offline agents' first candidate, with ``overrides`` on every kernel
    task (the program loads its kernels at import)."""
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    from stitchcuda_lab.agents.offline.coder import KERNEL_TASKS, PROGRAM
    from stitchcuda_lab.graph import analyse
    from stitchcuda_lab.settings import Settings
    from stitchcuda_lab.verifier.verify import load_module
    settings = Settings.from_env().replace(device=DEV)
    graph = analyse(prob, device=DEV, profile=True, settings=settings)
    plan = OfflinePlanner().plan(prob, graph, settings)
    overrides = dict(overrides)
    program = overrides.pop(PROGRAM, None)
    tasks = {t.id: dict(overrides) for t in plan.tasks if t.kind in KERNEL_TASKS} if overrides \
        else {}
    if program is not None:
        tasks[PROGRAM] = dict(program)
    cand = OfflineCoder().candidate(prob, graph, plan, tasks)
    src = workdir / f"cand_{path.stem}_{tag}.py"
    src.write_text(cand.module_source())
    return load_module(src, f"cand_{path.stem}_{tag}").ModelNew, cand


def _launch_paths(n: int = 3000) -> dict:
    """Host microseconds per launch of an empty kernel through each path."""
    import ctypes

    import torch

    from stitchcuda_lab import runtime
    mod = runtime.load('extern "C" __global__ void nop(float* p, long long n) {}',
                       name="nop")
    x = torch.zeros(16, device="cuda")
    out = {}

    def per_call(f):
        for _ in range(100):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        dt = time.perf_counter() - t0
        torch.cuda.synchronize()
        return round(dt / n * 1e6, 2)

    out["runtime.launch"] = per_call(
        lambda: mod.launch("nop", grid=(1, 1, 1), block=(32, 1, 1), args=(x, 16)))
    out["torch x.add_(1)"] = per_call(lambda: x.add_(1))
    cc = mod._cc
    k = mod.kernel("nop")
    cfg = cc.LaunchConfig(grid=(1,), block=(32,), shmem_size=0)
    stream = runtime.kernels._current_stream(mod.device)
    import numpy as np
    out["cuda.core launch (prebuilt config)"] = per_call(
        lambda: cc.launch(stream, cfg, k, np.intp(x.data_ptr()), np.int64(16)))
    try:   # the driver entry point through ctypes: the least Python per launch
        from cuda.bindings import driver
        h = k.handle
        if type(h).__name__ == "CUkernel":
            err, h = driver.cuKernelGetFunction(h)
        lib = ctypes.CDLL("libcuda.so.1")
        cu = lib.cuLaunchKernel
        u = ctypes.c_uint
        cu.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_void_p]
        cu.restype = ctypes.c_int
        fptr, sptr = int(h), torch.cuda.current_stream().cuda_stream

        def via_ctypes():
            a0, a1 = ctypes.c_void_p(x.data_ptr()), ctypes.c_longlong(16)
            params = (ctypes.c_void_p * 2)(ctypes.addressof(a0), ctypes.addressof(a1))
            rc = cu(fptr, 1, 1, 1, 32, 1, 1, 0, sptr, params, None)
            if rc:
                raise RuntimeError(f"cuLaunchKernel returned {rc}")
        out["ctypes cuLaunchKernel"] = per_call(via_ctypes)
    except Exception as e:  # noqa: BLE001  (a measurement, not a feature)
        out["ctypes cuLaunchKernel"] = f"failed: {type(e).__name__}: {e}"
    return out


def run(args) -> dict:
    import torch

    from stitchcuda_lab.bench import discover, environment
    from stitchcuda_lab.problem import load_problem
    from stitchcuda_lab.verifier.timing import time_forward

    variants = [("ours", {})]
    for v in args.variant:
        name, _, js = v.partition(":")
        variants.append((f"ours[{name}]", json.loads(js)))
    tiny = torch.zeros(1, device=DEV)
    floor = time_forward(lambda: tiny.add_(1), [], DEV, trials=50, warmup=5)["ms"]
    rows = []
    workdir = Path(tempfile.mkdtemp(prefix="stitch_breakdown_"))
    for path in discover(Path(args.folder), args.filter):
        prob = load_problem(path)
        model = prob.make_model(device=DEV, seed=0)
        inputs = list(prob.make_inputs(device=DEV, seed=1))
        fns = {"eager": model}
        torch._dynamo.reset()
        fns["compile"] = torch.compile(model)   # compiled on its first (warm-up) call
        for name, ov in variants:
            try:
                cls, _ = _candidate(prob, path, ov, workdir, name.strip("[]").replace("[", "_"))
                init = prob.namespace().get("get_init_inputs", list)
                torch.manual_seed(0)
                m = cls(*init()).to(DEV)
                m.train(model.training)
                fns[name] = m
            except Exception as e:  # noqa: BLE001  (report it and time the rest)
                print(f"{path.name}: {name} failed: {type(e).__name__}: {e}", file=sys.stderr)
        row = {"problem": path.name}
        with torch.no_grad():
            for name, fn in fns.items():
                try:
                    t = time_forward(fn, inputs, DEV, trials=args.trials, warmup=5)
                except Exception as e:  # noqa: BLE001  (e.g. no C++ compiler for Inductor)
                    print(f"{path.name}: {name} failed: {type(e).__name__}: {e}",
                          file=sys.stderr)
                    continue
                kms, kernels = _kernel_ms(fn, inputs)
                row[name] = {"ms": round(t["ms"], 4), "kernel_ms": round(kms, 4),
                             "host_ms": round(_host_ms(fn, inputs), 4)}
                if args.kernels:
                    row[name]["kernels"] = kernels[:args.kernels]
        rows.append(row)
        print(_line(row), flush=True)
        for name, v in row.items():
            for k, ms in (v.get("kernels", []) if isinstance(v, dict) else []):
                print(f"    {name:8s} {ms:8.4f} ms  {k}", flush=True)
    return {"environment": environment(), "floor_ms": round(floor, 4), "rows": rows,
            "launch_us": _launch_paths() if DEV == "cuda" else {},
            "command": " ".join(sys.argv)}


def _line(row: dict) -> str:
    parts = [f"{row['problem'][:28]:28s}"]
    for k, v in row.items():
        if isinstance(v, dict):
            parts.append(f"{k} {v['ms']:.3f} (k {v['kernel_ms']:.3f}, h {v['host_ms']:.3f})")
    return " | ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--filter", default=None, help="regular expression on file names")
    ap.add_argument("--variant", action="append", default=[], help='NAME:{"param": value}')
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--kernels", type=int, default=0,
                    help="list each contender's N longest kernels (name, device ms)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    global DEV
    DEV = args.device
    res = run(args)
    print(f"floor (one tiny op): {res['floor_ms']:.4f} ms")
    print("host us per launch:", json.dumps(res["launch_us"]))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
