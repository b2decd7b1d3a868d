"""``stitchcuda-lab bench DIR``: every problem in a folder, eager vs torch.compile vs ours.

Each problem runs in its own process (``python -m stitchcuda_lab.bench one ...``), so a crash
or a leak in one cannot touch the next, and the baselines and our candidate are timed in that
same process with the Verifier's protocol. Problems are spread over the local GPUs (one
process per GPU at a time), or over a Ray cluster with ``--ray`` (one GPU per task), so many
machines are driven by an existing engine rather than a scheduler of ours.

Results: ``results.json`` (device, versions, date, command, one row per problem),
``results.md`` (a table) and the chart (``bench_figure``: ``results.svg``, ``results.html``)
under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import bench_figure
from .errors import ConfigError, StitchError, UsageError
from .verdict import load_changed

ALL_MODES = "default,max-autotune-no-cudagraphs,reduce-overhead"


def shrink_source(source: str, factor: int) -> str:
    """Divide the problem's top-level integer constants >= 64 by ``factor`` (CPU smoke runs).

    A constant is a module-level assignment of an int or a tuple of ints, in any case
    (``BATCH = 8192``, KernelBench's ``batch_size = 16`` and ``height, width = 128, 128``);
    values below 64 (kernel sizes, strides, groups, heads) stay, so a shrunk problem keeps
    its structure; a shrunk constant stays a multiple of each group or head count it was a
    multiple of (``groups = 16`` keeps ``out_channels = 64`` at 16, not 8: GroupNorm
    refuses channels its groups do not divide).
    """
    if factor <= 1:
        return source
    import ast
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source   # the problem loader reports it with its line
    lines = source.splitlines()
    counts = [v for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)
              and re.search(r"group|head", t.id, re.I)
              for v in [_int_expr(node.value)] if v is not None and 1 < v < 64]

    def shrunk(v: int) -> int:
        step = math.lcm(1, *(c for c in counts if v % c == 0))
        return -(-max(1, v // factor) // step) * step
    for node in reversed(tree.body):
        if not isinstance(node, ast.Assign) or node.lineno != node.end_lineno:
            continue
        value = node.value
        items = value.elts if isinstance(value, ast.Tuple) else [value]
        found = [_int_expr(v) for v in items]
        values = [v for v in found if v is not None]
        if not items or len(values) < len(found):
            continue
        ints = [shrunk(v) if v >= 64 else v for v in values]
        text = ", ".join(map(str, ints))
        if isinstance(value, ast.Tuple) and len(ints) == 1:
            text += ","
        line = lines[node.lineno - 1]
        if line[value.col_offset] == "(":
            text = f"({text})"
        lines[node.lineno - 1] = (line[:value.col_offset] + text
                                  + line[value.end_col_offset:])
    return "\n".join(lines) + "\n"


def _int_expr(node) -> int | None:
    """The value of an int literal or of arithmetic on int literals (``16384 * 2``), else None."""
    import ast
    import operator
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow, ast.LShift: operator.lshift}
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        a, b = _int_expr(node.left), _int_expr(node.right)
        if a is None or b is None or (isinstance(node.op, ast.Pow) and b > 64):
            return None
        try:
            return ops[type(node.op)](a, b)
        except (ZeroDivisionError, ValueError):
            return None
    return None


def discover(folder: Path, pattern: str | None = None) -> list[Path]:
    """Problem files in ``folder``, in the order of their leading number (KernelBench names
    them 1_..., 2_..., 10_...), then by name."""
    files = sorted((p for p in folder.glob("*.py") if not p.name.startswith("_")),
                   key=lambda p: discover_key(p.name))
    if pattern:
        rx = re.compile(pattern)
        files = [p for p in files if rx.search(p.name)]
    return files


def discover_key(name: str) -> tuple[int, str]:
    m = re.match(r"(\d+)_", name)
    return (int(m.group(1)) if m else sys.maxsize, name)


_DOC_CATEGORY = re.compile(r"\s*([a-z][a-z0-9+-]*):")


def category_of(path: Path) -> str:
    """The category a problem's docstring starts with (``\"\"\"norm: ...``), else the second
    field of a ``NN_category_name.py`` file name in lower case, else 'other' (KernelBench's
    ``19_ReLU.py`` names an op, not a category)."""
    import ast
    try:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    except (OSError, SyntaxError, ValueError):
        doc = ""
    m = _DOC_CATEGORY.match(doc)
    if m:
        return m.group(1)
    parts = path.stem.split("_")
    if len(parts) >= 3 and parts[0].isdigit() and parts[1].islower():
        return parts[1]
    return "other"


# ---------------------------------------------------------------- one problem (child process)

def run_one(problem_path: str, *, device: str, iters: int, agent: str, modes: str,
            shrink: int, settings_overrides: dict[str, Any] | None = None,
            on_progress=None, ceiling: dict[str, Any] | None = None,
            on_partial=None) -> dict[str, Any]:
    """Optimise one problem and time it against the baselines; returns a result row.

    ``on_partial(row)``: called with the row as it stands whenever a new verdict is in, or
    once the reference is timed, so that a problem cut short by its timeout still reports
    what it reached."""
    from . import roofline
    from .problem import problem_from_source
    from .session import Session
    from .settings import Settings

    path = Path(problem_path)
    t0 = time.perf_counter()
    settings = Settings.from_env(device=device, iters=iters, agent=agent, compile_modes=modes,
                                 **(settings_overrides or {}))
    source = shrink_source(path.read_text(), shrink)
    problem = problem_from_source(source, name=path.stem, origin=str(path))
    session = Session.create(   # validated like a CLI problem
        problem, settings, on_progress=on_progress,
        on_validated=lambda report: early_baseline(problem.source, settings, report))
    work = roofline.least_work(problem)

    def row(timings: dict[str, float] | None = None) -> dict[str, Any]:
        return _row(path, session, modes, work, ceiling, t0, timings)

    if on_partial is not None:
        seen: list[int] = [-1]

        def progress(message: str, fraction: float | None) -> None:
            if on_progress is not None:
                on_progress(message, fraction)
            if len(session.state.verdicts) == seen[0]:
                return
            baseline = session.recorded_baseline()
            if session.best() is not None or baseline is not None:
                seen[0] = len(session.state.verdicts)
                on_partial(row(baseline))

        session.on_progress = progress
    session.advance(auto=True)
    return row()


# A model of many layers compiles for a minute or more in the judge (on the H200, eight
# problems sharing 16 cores: ResNet101 81 s, VGG16 over 87 s), and the judge used to start only
# after this process had analysed the problem's graph (5-42 s). It starts as soon as the
# problem is validated instead; the session's own request finds the timings done (the worker
# keeps them per problem) or waits for the rest. Not where the inputs and outputs are large:
# this process and the judge would hold them at once.
EARLY_BASELINE_BYTES = 2 << 30


def early_baseline(source: str, settings: Any, report: Any) -> threading.Thread | None:
    """Start timing the reference's baselines in the judge, on a thread of this process, while
    the graph is analysed; None where it is not worth it (no torch.compile mode, inputs and
    outputs over EARLY_BASELINE_BYTES by the validation ``report``). What it measures is what
    the session would (same worker, same options); a failure is left for the session's own
    request to meet and report."""
    if not settings.compile_modes or _io_bytes(report) > EARLY_BASELINE_BYTES:
        return None
    from .verifier.options import VerifyOptions
    from .verifier.worker import get_worker, resolve_device
    worker = get_worker(resolve_device(settings.device), settings)
    options = VerifyOptions.from_settings(settings)

    def run() -> None:
        try:
            worker.baseline(source, options=options)
        except Exception:  # noqa: BLE001, S110 - the session's own request reports it
            pass
    thread = threading.Thread(target=run, name="early-baseline", daemon=True)
    thread.start()
    return thread


def _io_bytes(report: Any) -> int:
    """Bytes of the inputs and outputs a validation report saw (tensors only)."""
    import torch
    total = 0
    for shapes, dtypes in ((report.input_shapes, report.input_dtypes),
                           (report.output_shapes, report.output_dtypes)):
        for shape, dtype in zip(shapes, dtypes):
            kind = getattr(torch, str(dtype), None)
            if shape is not None and isinstance(kind, torch.dtype):
                total += math.prod(shape) * kind.itemsize
    return total


def _row(path: Path, session, modes: str, work: dict[str, Any], ceiling: dict | None,
         t0: float, baseline: dict[str, float] | None = None) -> dict[str, Any]:
    """The bench row of ``session`` as it stands. ``baseline``: the reference's timings when
    already known (a row written while the session runs must not time anything)."""
    row: dict[str, Any] = {"problem": path.name, "category": category_of(path),
                           "session_dir": str(session.dir)}
    best = session.best()
    timings: dict[str, float] = {}
    if best is not None:
        cand, verdict = best
        timings = dict(verdict.timings)
        row.update(status=verdict.status, correct=verdict.correct, candidate=cand.id,
                   max_abs_err=verdict.max_abs_err, flags=verdict.flags,
                   # no kernel of its own and every op kept (a deep model's own forward
                   # replayed through a CUDA graph): PyTorch's kernels, launched otherwise
                   kernel_of_ours=bool(cand.kernels or cand.replaced),
                   cuda_graph=bool(cand.params.get("cuda_graph")),
                   channels_last=bool((cand.params.get("tasks") or {}).get(
                       "program", {}).get("channels_last")))
    else:
        # a problem cut short before any candidate's verdict says so: no candidate lost
        status = "no_passing_candidate" if session.state.verdicts else "no_verdict"
        row.update(status=status, correct=False, candidate=None)
        timings = dict(baseline if baseline is not None else session.baseline())
    # a task the best candidate switched off (its ops in the library) keeps PyTorch's op
    params = (best[0].params.get("tasks") or {}) if best is not None else {}
    row["tasks"] = [{"kind": t.kind, "status": t.status, "ops": len(t.ops),
                     "off": bool({**t.params, **params.get(t.id, {})}.get("off"))}
                    for t in (session.state.plan.tasks if session.state.plan else [])]
    row["timings"] = timings
    eager = timings.get("eager")
    ours = timings.get("ours")
    # The agent keeps the reference program when no candidate beats it: what a user gets is
    # never slower than eager, and the row says so.
    row["kept_reference"] = session.keeps_reference() or ours is None
    # which op stopped the agent (or that no candidate beat eager), in the agent's words
    row["kept_reason"] = (session.kept_reason() or "no timing of the candidate") \
        if row["kept_reference"] else None
    # each named cause among the verdicts that did not pass (out_of_memory, patched_timer...)
    row["failures"] = sorted({v.reason_name for v in session.state.verdicts.values()
                              if v.status != "pass" and v.reason_name})
    row["ours_ms"] = eager if row["kept_reference"] else ours
    row["eager_ms"] = eager
    for mode in [m for m in modes.split(",") if m]:
        row[f"compile_{mode}_ms"] = timings.get(f"compile:{mode}")
    row["speedup_vs_eager"] = _ratio(eager, row["ours_ms"])
    row["speedup_vs_compile"] = _ratio(timings.get("compile:default"), row["ours_ms"])
    compiled = [t for k, t in timings.items() if k.startswith("compile:") and t]
    row["speedup_vs_best_compile"] = _ratio(min(compiled, default=None), row["ours_ms"])
    row["candidate_speedup_vs_eager"] = _ratio(eager, ours)
    row.update(_limits(work, row["ours_ms"], session, ceiling))
    row["seconds"] = round(time.perf_counter() - t0, 1)
    try:
        row["cpus"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        row["cpus"] = os.cpu_count()
    return row


def _limits(work: dict[str, Any], ms: float | None, session,
            ceiling: dict | None) -> dict[str, Any]:
    """The row's distance from the device's limits (``roofline``): advice, never fatal.
    ``work``: ``roofline.least_work`` of the problem; ``ceiling``: the device's figures,
    measured once for the whole bench."""
    from . import roofline
    device = ceiling if ceiling is not None else (
        (session.facts().get("device") or {}) if ms else {})
    keep: dict[str, Any] = {k: work[k] for k in ("bytes", "flops", "work_error") if k in work}
    return {**keep, **roofline.shares(work, ms, device)}


def _ratio(num: float | None, den: float | None) -> float | None:
    if not num or not den:
        return None
    return num / den


def _child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="stitchcuda_lab.bench one")
    ap.add_argument("problem")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--agent", default="offline")
    ap.add_argument("--modes", default=ALL_MODES)
    ap.add_argument("--shrink", type=int, default=1)
    ap.add_argument("--json-out", required=True)
    ap.add_argument("--cpus", default=None, help="comma list of the CPUs to keep to")
    ap.add_argument("--ceiling", default=None, help="JSON file of the device's measured figures")
    a = ap.parse_args(argv)
    _apply_cpu_slice(a.cpus)
    stage = Path(a.json_out).with_suffix(".stage")
    t0 = time.perf_counter()

    def on_progress(message: str, fraction: float | None) -> None:
        # The parent names this stage if the problem runs out of time; the log says when
        # each stage began, so a slow problem shows where its time went.
        print(f"[{time.perf_counter() - t0:6.1f} s] {message}", flush=True)
        try:
            stage.write_text(message)
        except OSError:
            pass

    partial = partial_path(Path(a.json_out))

    def on_partial(row: dict) -> None:   # what the parent reports if this runs out of time
        write_whole(partial, json.dumps(row, indent=2, default=str))

    try:
        ceiling = json.loads(Path(a.ceiling).read_text()) if a.ceiling else None
        row = run_one(a.problem, device=a.device, iters=a.iters, agent=a.agent, modes=a.modes,
                      shrink=a.shrink, on_progress=on_progress, ceiling=ceiling,
                      on_partial=on_partial)
    except Exception as e:  # recorded in the row; the bench goes on with the next problem
        why = e.one_line() if isinstance(e, StitchError) else str(e)   # as the CLI says it
        row = {"problem": Path(a.problem).name, "category": category_of(Path(a.problem)),
               "status": "error", "correct": False, "error": f"{type(e).__name__}: {why}"}
    write_whole(Path(a.json_out), json.dumps(row, indent=2, default=str))
    return 0


def shared_gpu_ran_out(row: dict, args: argparse.Namespace) -> bool:
    """Whether ``row`` lost its candidates to a GPU that other problems filled: run with
    ``--jobs`` over one, the reference kept (no candidate passed, or none beat eager), and a
    verdict out of memory (or the problem's process itself, in its error), or a candidate's
    process killed by SIGKILL: the host's out-of-memory killer, when the problems beside it
    filled the host's memory with their inputs and outputs in shared memory."""
    ran_out = "out_of_memory" in (row.get("failures") or []) \
        or "out of memory" in str(row.get("error") or "").lower() \
        or ("crash" in (row.get("failures") or [])
            and "SIGKILL" in str(row.get("kept_reason") or ""))
    return bool(row.get("shared_gpu")) and not getattr(args, "ray", False) \
        and not args.device.startswith("cpu") and bool(row.get("kept_reference", True)) \
        and ran_out


def partial_path(row_file: Path) -> Path:
    """Where a problem's process keeps its row as it stands (``run_one``'s ``on_partial``)."""
    return row_file.with_suffix(".partial.json")


# ---------------------------------------------------------------- the whole folder

def cpu_slices(n: int) -> list[list[int]]:
    """This process's CPUs in ``n`` contiguous, nearly equal slices (shared when too few).

    One slice per GPU slot: a problem's torch.compile (whose workers take every core they can)
    then cannot starve the host side of the timing running for another GPU.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    if n <= 1:
        return [cpus]
    if n > len(cpus):
        return [[cpus[i % len(cpus)]] for i in range(n)]
    size, extra = divmod(len(cpus), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(cpus[start:end])
        start = end
    return out


def _apply_cpu_slice(spec: str | None) -> None:
    """In a problem's process: keep to the CPUs the parent gave this GPU slot (``0,1,2``)."""
    if not spec or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, {int(c) for c in spec.split(",")})
    except (OSError, ValueError):
        pass   # a slice this machine does not have: run unpinned rather than not at all


def _spawn(problem: Path, out_dir: Path, args: argparse.Namespace, gpu: int | None,
           cpus: list[int] | None = None, gpu_lock: str | None = None,
           cap: float | None = None) -> dict:
    row = _spawn_row(problem, out_dir, args, gpu, cpus, gpu_lock, cap)
    row.setdefault("suite", problem.parent.name)
    return row


def _spawn_row(problem: Path, out_dir: Path, args: argparse.Namespace, gpu: int | None,
               cpus: list[int] | None, gpu_lock: str | None, cap: float | None = None) -> dict:
    timeout = min(args.timeout, cap) if cap else args.timeout
    deadline = getattr(args, "deadline", None)
    if deadline is not None:
        left = deadline - time.perf_counter()
        if left < min(MIN_PROBLEM_S, args.budget / 2):   # a small --budget: what it says
            return {"problem": problem.name, "category": category_of(problem),
                    "status": "not_run", "correct": False,
                    "error": f"the bench's --budget of {args.budget:.0f} s was spent"
                             + (f" ({left:.0f} s were left: too few for a verdict)"
                                if left > 0 else "")}
        timeout = min(timeout, left)
    target = out_dir / "rows" / f"{problem.stem}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "stitchcuda_lab.bench", "one", str(problem),
           "--device", args.device, "--iters", str(args.iters), "--agent", args.agent,
           "--modes", args.modes, "--shrink", str(args.shrink), "--json-out", str(target)]
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if gpu_lock:
        from .settings import env_name
        env[env_name("gpu_lock")] = gpu_lock
    ceiling = out_dir / "ceiling.json"
    if ceiling.exists():
        cmd += ["--ceiling", str(ceiling)]
    if cpus:
        cmd += ["--cpus", ",".join(str(c) for c in cpus)]
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(len(cpus)))
    log = out_dir / "rows" / f"{problem.stem}.log"
    partial = partial_path(target)
    for stale in (target, target.with_suffix(".stage"), partial):
        stale.unlink(missing_ok=True)
    try:
        rc = _run_group(cmd, env, log, timeout)
    except subprocess.TimeoutExpired:
        finished = _read_row(target)   # the row was written; the time ran out shutting down
        if finished is not None:
            return finished
        stage = target.with_suffix(".stage")
        doing = stage.read_text().strip() if stage.exists() else "starting"
        cut = f"over {timeout:.0f} s, while {doing}"
        reached = _read_row(partial)   # its best verdict so far, or the reference kept
        if reached is None:
            return {"problem": problem.name, "category": category_of(problem),
                    "status": "timeout", "correct": False, "stage": doing, "error": cut}
        return dict(reached, cut_short=cut, stage=doing)
    finished = _read_row(target)
    if finished is not None:
        return finished
    tail = log.read_text()[-800:] if log.exists() else ""
    how = f"exit {rc}"
    if rc < 0:
        import signal
        how = f"killed by {signal.Signals(-rc).name}" + (
            " (out of memory?)" if -rc == signal.SIGKILL else "")
    return {"problem": problem.name, "category": category_of(problem), "status": "crashed",
            "correct": False, "error": f"{how}: {tail}" if tail else how}


def _read_row(path: Path) -> dict | None:
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return row if isinstance(row, dict) else None


def _run_group(cmd: list[str], env: dict, log: Path, timeout: float) -> int:
    """Run a problem's process in a process group of its own; past ``timeout`` the whole
    group goes (the problem's Verifier worker and candidate processes with it), so a problem
    that ran out of time leaves nothing holding the GPU for the next one."""
    import signal
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise


def _local_gpus(device: str) -> list[int | None]:
    if device == "cpu":
        return [None]
    try:
        import torch
        n = torch.cuda.device_count()
    except Exception:
        n = 0
    return list(range(n)) or [None]


# A problem's processes hold several copies of its inputs and outputs on the GPU at once (the
# judge's input sets and reference outputs, the candidate's copies). Measured alone on an H100
# with the three compile modes, all processes, used memory sampled once a second: a softmax
# that reads and writes 12 GiB peaked at 50.6 GiB, a mean over 8 GiB at 35 GiB (4.2-4.4 times
# what one forward moves; on the H200, before the Verifier kept fewer copies, the softmax held
# 59 GiB). The factors of 10 and 4 used before planned 147 and 83 GiB for them, and level 1 of
# KernelBench ran two problems at a time on a card that never passed 54 of its 79 GB.
COPIES = 5
# ... and the intermediates alive at once in one forward (``roofline``'s peak_bytes), held by
# the judge's eager and compiled baselines and the candidate's process. A plan can still be
# short (a peak between two samples, a neighbour that grows after it started): a problem
# starts beside others only where the driver also reports its need free, and on the local
# runner one whose candidate ran out of memory beside others runs again alone while the
# budget lasts.
HOLDERS = 2
# The caller's and the judge's processes, the candidate's and two spares each hold a CUDA
# context and cached blocks besides (about 0.6 GB a context): a fixed allowance per problem.
PER_PROBLEM = 3 * 2**30
MEMORY_USE = 0.85   # the share of a GPU's memory the problems in flight on it may plan on


def gpu_free_bytes(gpu: Any) -> int | None:
    """Free memory on GPU ``gpu`` as the driver reports it (nvidia-smi, so this process makes
    no CUDA context of its own); None where it cannot be asked."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,"
                              "nounits", "-i", str(gpu or 0)], capture_output=True, text=True,
                             timeout=10)
        return int(out.stdout.split()[0]) * 2**20
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def footprints(problems: list[Path], shrink: int = 1) -> dict[str, int]:
    """Bytes each problem's processes will hold on the GPU, by file name: ``COPIES`` times what
    one forward reads and writes and ``HOLDERS`` times its peak of live intermediates
    (``roofline.least_work``, built on the meta device), from a process of its own; {} where
    it cannot tell."""
    code = "import sys; from stitchcuda_lab.bench import _footprints_main; " \
           "_footprints_main(sys.argv[1:])"
    try:
        out = subprocess.run([sys.executable, "-c", code, str(shrink), *map(str, problems)],
                             capture_output=True, text=True, timeout=300)
        return {k: int(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    except (subprocess.TimeoutExpired, ValueError, IndexError, AttributeError):
        return {}


def _footprints_main(argv: list[str]) -> None:
    from .problem import problem_from_source
    from .roofline import least_work
    shrink, files = int(argv[0]), argv[1:]
    sizes: dict[str, int] = {}
    for f in files:
        try:
            source = shrink_source(Path(f).read_text(), shrink)
            problem = problem_from_source(source, name=Path(f).stem, origin=f)
            work = least_work(problem)
            sizes[Path(f).name] = (COPIES * int(work.get("bytes") or 0)
                                   + HOLDERS * int(work.get("peak_bytes") or 0))
        except Exception:  # noqa: BLE001 - a problem that cannot be sized is scheduled as small
            sizes[Path(f).name] = 0
    print(json.dumps(sizes))


# Less than this left of the budget, a problem is not started: KernelBench's Conv3d_LeakyReLU
# started with 20 s left on an H100 shared by 8 problems and was still validating when cut
# ("timeout", where it had not been run at all)
MIN_PROBLEM_S = 30.0
# A problem's share of the budget is never cut below this (a first candidate's verdict takes
# about this long on a shared H200), unless less than this is left at all.
LEAST_SHARE = 45.0
# ... and more where the baselines time several torch.compile modes before any candidate:
# three took 20-90 s a problem on an H100 (max-autotune's GEMM autotuning, 60 s of it), and
# a 420 s run of level 2 that gave each problem 51-76 s cut 5 of them short while timing the
# baselines and 6 more in their first candidate's verification.
MODE_SHARE = 25.0


def least_share(modes: str) -> float:
    """The least a problem is given: a first verdict's time, and each compile mode's after
    the first."""
    n = len([m for m in (modes or "").split(",") if m.strip()])
    return LEAST_SHARE + MODE_SHARE * max(0, n - 1)


def fair_share(left: float, waiting: int, slots: int, least: float = LEAST_SHARE) -> float:
    """Seconds a problem starting now may run, so that the ``waiting`` problems not started
    yet (this one among them) each get a like part of the ``left`` budget, ``slots`` at a
    time. On the H200 a level-2 run of 20 problems, each given its whole --timeout in turn,
    left the last three 28 s of a 555 s budget (they kept the reference); shared, each gets
    ``left`` over the waves still to run."""
    waves = math.ceil(waiting / max(1, slots))
    return max(min(least, left), left / max(1, waves))


def expected_slots(needs: list[int], memory: float, jobs: int, gpus: int) -> int:
    """How many problems are likely to run at once: ``jobs`` per GPU, or fewer where the GPU's
    ``memory`` holds fewer problems of the median footprint (``needs``, bytes)."""
    per_gpu = jobs
    if memory and needs:
        per_gpu = min(jobs, max(1, int(memory // max(1, statistics.median(needs)))))
    return per_gpu * max(1, gpus)


def run_local(problems: list[Path], out_dir: Path, args: argparse.Namespace,
              progress=print, on_row=None) -> list[dict]:
    gpus = _local_gpus(args.device)
    jobs = max(1, getattr(args, "jobs", 1))
    # `jobs` problems per GPU overlap their host work; their timed work takes the GPU alone
    # through a lock file per GPU (gpulock.py). Each slot keeps to a slice of the CPUs.
    taken = [(g, j) for g in gpus for j in range(jobs)]
    slices = cpu_slices(len(taken)) if len(taken) > 1 else [None]
    free = [(slot[0], cpus) for slot, cpus in zip(taken, slices * len(taken))]
    locks = {g: str(out_dir.resolve() / f".gpu{g if g is not None else ''}.lock")
             for g in gpus} if jobs > 1 else {}
    # Problems that share a GPU share its memory too: one starts only where what it will
    # hold (COPIES times its inputs and outputs) fits beside the problems running there, or
    # where nothing runs. Problems start in order, so a large one is never passed over.
    sizes: dict[str, int] = getattr(args, "footprints", None) or {}
    memory = (getattr(args, "memory_gb", None) or 0) * 2**30 * MEMORY_USE
    in_use = {g: 0 for g in gpus}
    running = {g: 0 for g in gpus}
    active: dict[Any, set[str]] = {g: set() for g in gpus}
    shared: set[str] = set()          # problems that had another beside them on their GPU
    rows: dict[str, dict] = {}
    cond = threading.Condition()

    asked: dict[Any, tuple[float, int | None]] = {}   # the driver's free memory, once a second

    def fits(g, need: int) -> bool:
        if not memory or running[g] == 0:
            return True
        if in_use[g] + need > memory:
            return False
        # what the others hold now leaves room too (a plan can be short: a model's
        # workspaces are not in it)
        when, free_now = asked.get(g, (0.0, None))
        if time.monotonic() - when > 1.0:
            free_now = gpu_free_bytes(g)
            asked[g] = (time.monotonic(), free_now)
        return free_now is None or need <= free_now

    needs = [sizes.get(p.name, 0) + (PER_PROBLEM if sizes else 0) for p in problems]
    slots = expected_slots(needs, memory, jobs, len(gpus))
    deadline = getattr(args, "deadline", None)

    def work(p: Path, slot: tuple, need: int, cap: float | None) -> None:
        g, cpus = slot
        try:
            row = _spawn(p, out_dir, args, g, cpus, gpu_lock=locks.get(g), cap=cap)
        except Exception as e:  # noqa: BLE001 - one problem's failure is its row, not the run's
            row = {"problem": p.name, "category": category_of(p), "suite": p.parent.name,
                   "status": "error", "correct": False, "error": f"{type(e).__name__}: {e}"}
        finally:
            with cond:
                in_use[g] -= need
                running[g] -= 1
                active[g].discard(p.name)
                free.append(slot)
                cond.notify_all()
        with cond:
            row["shared_gpu"] = p.name in shared and jobs > 1
            rows[p.name] = row
            progress(_progress_line(len(rows), len(problems), row))
            if on_row is not None:
                on_row(row)

    threads = []
    for i, (p, need) in enumerate(zip(problems, needs)):
        with cond:
            while not (slot := next((s for s in free if fits(s[0], need)), None)):
                cond.wait(timeout=2.0)   # memory others free is not announced
            free.remove(slot)
            in_use[slot[0]] += need
            running[slot[0]] += 1
            if active[slot[0]]:
                shared.update(active[slot[0]] | {p.name})
            active[slot[0]].add(p.name)
        cap = None if deadline is None else fair_share(deadline - time.perf_counter(),
                                                       len(problems) - i, slots,
                                                       least_share(args.modes))
        t = threading.Thread(target=work, args=(p, slot, need, cap))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return [rows[p.name] for p in problems]


def run_ray(problems: list[Path], out_dir: Path, args: argparse.Namespace,
            progress=print, on_row=None) -> list[dict]:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray", hint="pip install ray, or drop --ray") from None
    ray.init(address=os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True)
    gpus = 1 if args.device != "cpu" else 0

    @ray.remote(num_gpus=gpus)
    def remote(p: str) -> dict:  # Ray sets CUDA_VISIBLE_DEVICES for the task
        return _spawn(Path(p), out_dir, args, None)

    pending = {remote.remote(str(p)): p for p in problems}
    rows: dict[str, dict] = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        p = pending.pop(done[0])
        rows[p.name] = ray.get(done[0])
        progress(_progress_line(len(rows), len(problems), rows[p.name]))
        if on_row is not None:
            on_row(rows[p.name])
    return [rows[p.name] for p in problems]


def _progress_line(i: int, n: int, row: dict) -> str:
    s = row.get("speedup_vs_eager")
    c = row.get("speedup_vs_compile")
    return (f"[{i}/{n}] {row['problem']}: {row.get('status')}"
            + (" (cut short)" if row.get("cut_short") else "")
            + (f"  {s:.2f}x eager" if s else "") + (f"  {c:.2f}x compile" if c else ""))


def geomean(xs: list[float | None]) -> float | None:
    ok = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in ok) / len(ok)) if ok else None


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        import torch
        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            env["device"] = torch.cuda.get_device_name(0)
            env["gpus"] = torch.cuda.device_count()
        else:
            env["device"] = platform.processor() or "cpu"
            env["cpu_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return env


def _keeps_every_op(row: dict) -> bool:
    """A best candidate that runs PyTorch's own ops, no kernel of ours: the reference's
    kernels by another path, a CUDA graph over them included (it changes how they are
    launched, not what runs): as its row says (``kernel_of_ours``), or for rows written before
    that, as its plan's tasks say (each kept, switched off or the graph)."""
    if "kernel_of_ours" in row:
        return not row["kernel_of_ours"]
    tasks = [t for t in row.get("tasks") or [] if isinstance(t, dict)]
    return bool(tasks) and all(t.get("kind") in ("keep", "cuda_graph") or t.get("off")
                               for t in tasks)


def _graph_only(row: dict) -> bool:
    """A correct row won by PyTorch's own ops replayed through a CUDA graph."""
    graphed = row.get("cuda_graph") if "cuda_graph" in row else any(
        isinstance(t, dict) and t.get("kind") == "cuda_graph" for t in row.get("tasks") or [])
    return bool(row.get("correct")) and not row.get("kept_reference") \
        and _keeps_every_op(row) and bool(graphed)


FASTER = 1.05   # "faster than torch.compile" means by more than 5%
SLOWER = 0.98   # "slower than eager" means by more than 2%


def _group_summary(rows: list[dict]) -> dict[str, Any]:
    """The figures a reader compares with published systems, for one group of rows."""
    vs_compile = [r.get("speedup_vs_compile") for r in rows]
    return {
        "problems": len(rows),
        "correct": sum(bool(r.get("correct")) for r in rows),
        "own_kernel": sum(bool(r.get("correct")) and not r.get("kept_reference")
                          and not _keeps_every_op(r) for r in rows),
        "graph_only": sum(_graph_only(r) for r in rows),
        "geomean_vs_eager": geomean([r.get("speedup_vs_eager") for r in rows]),
        "geomean_vs_compile": geomean(vs_compile),
        "geomean_vs_best_compile": geomean([r.get("speedup_vs_best_compile") for r in rows]),
        "faster_than_compile": sum(bool(x and x > FASTER) for x in vs_compile),
        "slower_than_eager": sum(bool(r.get("speedup_vs_eager") is not None
                                      and r["speedup_vs_eager"] < SLOWER) for r in rows)}


def summarise(rows: list[dict]) -> dict[str, Any]:
    summary = _group_summary(rows)
    for field, key in (("suites", "suite"), ("categories", "category")):
        groups: dict[str, list[dict]] = {}
        for r in rows:
            groups.setdefault(r.get(key) or "other", []).append(r)
        summary[field] = {name: _group_summary(rs) for name, rs in sorted(groups.items())}
    return summary


def _fmt(x, spec=".3f") -> str:
    return "—" if x is None else format(x, spec)


def _row_cells(r: dict, modes: list[str]) -> list[str]:
    status = r.get("status", "?")
    if r.get("kept_reference"):
        status += " (reference kept: why below)" if r.get("kept_reason") else \
            " (reference kept)"
    elif _graph_only(r):
        status += " (PyTorch's own ops in a CUDA graph)"
    elif r.get("correct") and _keeps_every_op(r) and r.get("channels_last"):
        status += " (PyTorch's own ops, channels-last)"
    if r.get("cut_short"):
        status += f" (cut short: {str(r['cut_short'])[:100]})"
    if load_changed(r.get("flags")):
        status += " (the host's load changed while it was timed: its ratios compare two loads)"
    if r.get("error"):
        status += f": {str(r['error'])[:120]}"
    share = r.get("ceiling_share")
    limit = "—" if share is None else f"{share:.0%} {'BW' if r.get('bound') == 'memory' else 'FLOP'}"
    return ([r["problem"], status.replace("|", "/"), _fmt(r.get("eager_ms"))]
            + [_fmt(r.get(f"compile_{m}_ms")) for m in modes]
            + [_fmt(r.get("ours_ms")), _fmt(r.get("speedup_vs_eager"), ".2f") + "x",
               _fmt(r.get("speedup_vs_compile"), ".2f") + "x", limit])


def _summary_table(title: str, groups: dict[str, dict]) -> list[str]:
    lines = ["", f"| {title} | problems | correct | own kernel | vs eager | vs compile | "
             "vs best compile | faster than compile by >5% | slower than eager by >2% |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, g in groups.items():
        lines.append(
            f"| {name} | {g['problems']} | {g['correct']} | {g['own_kernel']} | "
            f"{_fmt(g['geomean_vs_eager'], '.2f')}x | {_fmt(g['geomean_vs_compile'], '.2f')}x | "
            f"{_fmt(g['geomean_vs_best_compile'], '.2f')}x | {g['faster_than_compile']} | "
            f"{g['slower_than_eager']} |")
    return lines


def markdown(result: dict) -> str:
    env = result["environment"]
    modes = [m for m in result["modes"].split(",") if m]
    head = ["problem", "status", "eager ms"] + [f"compile {m} ms" for m in modes] + \
           ["ours ms", "vs eager", "vs compile", "of ceiling"]
    lines = [f"# Benchmark: {env.get('device', '?')}", "",
             f"{env.get('date')} · torch {env.get('torch')} · CUDA {env.get('cuda')} · "
             f"`{result['command']}`" + ("" if result.get("complete", True) else
                                         " · **partial: the run did not finish**")]
    ceiling = env.get("ceiling") or {}
    if ceiling.get("bandwidth_gbs"):
        lines.append(f"Ceilings measured in this run: copy {ceiling['bandwidth_gbs']:.0f} GB/s, "
                     f"TF32 GEMM {ceiling.get('tf32_tflops', 0):.0f} TFLOP/s, plain fp32 GEMM "
                     f"{ceiling.get('fp32_tflops', 0):.1f} TFLOP/s.")
    lines.append("")
    suites: dict[str, list[dict]] = {}
    for r in result["rows"]:
        suites.setdefault(r.get("suite") or "", []).append(r)
    for suite, rows in suites.items():
        if len(suites) > 1:
            lines += [f"## {suite}", ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(_row_cells(r, modes)) + " |" for r in rows]
        lines.append("")
    s = result["summary"]
    graphs = (f", {s['graph_only']} with PyTorch's own ops in a CUDA graph"
              if s.get("graph_only") else "")
    lines += [f"Correct: {s['correct']}/{s['problems']} ({s['own_kernel']} with a kernel of "
              f"ours{graphs}). Geomean vs eager {_fmt(s['geomean_vs_eager'], '.2f')}x, vs "
              f"torch.compile default {_fmt(s['geomean_vs_compile'], '.2f')}x. "
              "\"of ceiling\": the least bytes (or FLOPs) a forward must move at our time, "
              "as a share of this device's measured copy bandwidth (BW) or fp32-input tensor-core "
              "GEMM rate (FLOP, TF32)."]
    if len(s.get("suites", {})) > 1:
        lines += _summary_table("suite", s["suites"])
    lines += _summary_table("category", s["categories"])
    kept = [r for r in result["rows"] if r.get("kept_reason")]
    if kept:
        lines += ["", "Reference kept:", ""]
        lines += [f"- {r['problem']}: {r['kept_reason']}" for r in kept]
    return "\n".join(lines) + "\n"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _problems(args: argparse.Namespace) -> list[Path]:
    problems: list[Path] = []
    for d in args.dir:
        folder = Path(d)
        if not folder.is_dir():
            raise UsageError(f"{folder} is not a folder", hint="give folders of problem files "
                             "(Model, get_inputs, get_init_inputs), e.g. benchmarks/problems")
        found = discover(folder, args.filter)
        if not found:
            raise UsageError(f"no problem files (*.py) in {folder}"
                             + (f" matching --filter {args.filter!r}" if args.filter else ""))
        problems += found
    names = [p.name for p in problems]
    twice = sorted({n for n in names if names.count(n) > 1})
    if len(args.dir) > 1 and twice:
        raise UsageError(f"problem files of the same name in two folders: {', '.join(twice)}",
                         hint="run those folders in separate bench runs (--out apart)")
    return problems


def main_bench(args: argparse.Namespace) -> int:
    problems = _problems(args)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    args.deadline = t0 + args.budget if args.budget else None
    result = {"environment": environment(), "modes": args.modes, "iters": args.iters,
              "agent": args.agent, "shrink": args.shrink,
              "command": "stitchcuda-lab bench " + " ".join(sys.argv[2:]),
              "complete": False, "rows": []}
    sizing = None
    # problems that will share a GPU are sized while the ceiling is measured
    if args.jobs > 1 and not args.ray and not args.device.startswith("cpu"):
        sizes: dict[str, int] = {}
        sizing = threading.Thread(target=lambda: sizes.update(footprints(problems,
                                                                           args.shrink)))
        sizing.start()
    result["environment"]["ceiling"] = ceiling = _measure_ceiling(out_dir, args)
    if sizing is not None:
        sizing.join()
        args.footprints, args.memory_gb = sizes, (ceiling or {}).get("memory_gb")
    done: dict[str, dict] = {}
    order = {p.name: i for i, p in enumerate(problems)}

    def on_row(row: dict) -> None:
        # Written after every problem: a run cut short still leaves every finished row.
        done[row["problem"]] = row
        _write(out_dir, dict(result, rows=sorted(done.values(), key=lambda r: order[r["problem"]]),
                             seconds=round(time.perf_counter() - t0, 1)))

    run = run_ray if args.ray else run_local
    rows = run(problems, out_dir, args, progress=_say, on_row=on_row)
    # A candidate that ran out of memory (GPU or host) beside other problems was not judged
    # on its own: such problems run again, one at a time, while the budget lasts.
    again = [p for p, r in zip(problems, rows) if shared_gpu_ran_out(r, args)]
    if again:
        _say(f"running {len(again)} problem(s) again alone: their candidates ran out of memory "
             "beside other problems")
        alone = argparse.Namespace(**dict(vars(args), jobs=1, footprints=None))
        redo = {r["problem"]: r for r in run_local(again, out_dir, alone, progress=_say)}
        for i, p in enumerate(problems):
            r = redo.get(p.name)
            if r is not None and (r.get("correct") or r.get("eager_ms")):   # it got as far
                rows[i] = dict(r, rerun_alone="its candidates ran out of memory beside "
                                              "other problems", first_run=rows[i])
                on_row(rows[i])
    result.update(complete=True, seconds=round(time.perf_counter() - t0, 1), rows=rows)
    result = _write(out_dir, result)
    bench_figure.write(result, out_dir / "results")
    if getattr(args, "json", False):
        print(json.dumps(result["summary"], default=str))
    else:
        print(markdown(result))
    return 0


def _measure_ceiling(out_dir: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    """The device's copy bandwidth and GEMM rates (``doctor.device_facts``), measured once in
    a process of their own before any problem runs, for every row's "of ceiling"."""
    target = out_dir / "ceiling.json"
    target.unlink(missing_ok=True)
    code = ("import json, sys; from stitchcuda_lab.doctor import device_facts; "
            "from stitchcuda_lab.verifier.worker import resolve_device; "
            "print(json.dumps(device_facts(resolve_device(sys.argv[1]))))")
    try:
        out = subprocess.run([sys.executable, "-c", code, args.device], capture_output=True,
                             text=True, timeout=120)
        facts = json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        _say("could not measure the device's ceilings; rows go without their share of them")
        return None
    target.write_text(json.dumps(facts))
    return facts


def _write(out_dir: Path, result: dict) -> dict:
    result = dict(result, summary=summarise(result["rows"]))
    for name, text in (("results.json", json.dumps(result, indent=2, default=str)),
                       ("results.md", markdown(result))):
        write_whole(out_dir / name, text)
    return result


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a reader (the parent of a problem's
    process, which may kill it at any moment; a person watching the results) never sees half."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="+", help="folders of problem files in the KernelBench "
                   "contract (each folder is a suite in the summary: level1 level2 ...)")
    p.add_argument("--device", default="auto")
    p.add_argument("--iters", type=int, default=2)
    p.add_argument("--agent", default="offline")
    p.add_argument("--modes", default=ALL_MODES, help="torch.compile modes to time")
    p.add_argument("--out", default="bench_results")
    p.add_argument("--filter", default=None, help="regex on file names")
    p.add_argument("--shrink", type=int, default=1,
                   help="divide the problems' size constants by this (CPU smoke runs)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per problem")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run: problems not started by then are "
                   "recorded as not run, and the last ones get what is left")
    p.add_argument("--jobs", type=int, default=1,
                   help="problems at once per GPU: their host work (compiling, building, "
                   "planning) overlaps, their timed work takes the GPU alone")
    p.add_argument("--ray", action="store_true", help="spread problems over a Ray cluster")
    p.add_argument("--json", action="store_true")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "one":
        sys.exit(_child_main(sys.argv[2:]))
    ap = argparse.ArgumentParser(prog="python -m stitchcuda_lab.bench")
    add_arguments(ap)
    sys.exit(main_bench(ap.parse_args()))
