"""The Verification protocol, run inside the worker process (never in the caller's process).

``run_verify`` takes a problem's and a candidate's Python source and returns a Verdict dict:

1. build: import the candidate (kernels compile here, or in ``ModelNew.__init__``); compiler
   errors are ``build_error`` with the compiler's log.
2. models: ``torch.manual_seed(seed)`` before ``get_init_inputs()``, before ``Model(*init)`` and
   before ``ModelNew(*init)``.
3. trials (>= ``trials``): fresh inputs from ``get_inputs()`` under seed + trial; the reference
   and the candidate each get their own clones; freed memory is filled with NaN right before
   the candidate's call (its outputs come from the same allocator, so unwritten elements show
   up); per-dtype tolerance; a second call on the same inputs must match the first; inputs must
   be unchanged; the aten ops of every call are traced (antihack.py).
4. anti-hacking: outputs aliasing inputs or earlier outputs, cached or constant results, unjoined
   CUDA streams, background threads (also native ones: outputs that change after the call),
   outputs that are Tensor subclasses (lazy), patched timers or Verifier functions, PyTorch
   fallbacks.
5. timing (timing.py) of eager, torch.compile modes (cached per problem in the worker) and ours.
   Then one held-out call on inputs from an unannounced seed: a candidate right only on the
   recorded seeds (a lookup table) or only before the timed calls (a cache) is rejected.
6. profiles: reference and candidate timelines, kernel summary, ncu.

Reasons are stable names (``antihack.REASONS``); ``Verdict.reason`` is "name: detail".
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BuildError
from ..verdict import TrialResult, Verdict
from . import antihack, mismatch, profile, timing
from .options import VerifyOptions

DEFAULT_TOL = {"float32": 1e-4, "float64": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


@dataclass
class WorkerState:
    """What one worker process keeps between jobs."""
    device: str
    workdir: Path
    baselines: dict = field(default_factory=dict)
    jobs: int = 0


class Reject(Exception):
    """A hacking pattern: status "rejected"."""

    def __init__(self, name: str, detail: str = ""):
        self.name, self.detail = name, detail
        super().__init__(f"{name}: {detail}" if detail else name)


def _status_verdict(status: str, name: str, detail: str = "", **kw: Any) -> dict:
    reason = f"{name}: {detail}" if detail else name
    return Verdict(status=status, reason=reason, **kw).to_dict()


VERIFIER_PREFIXES = ("stitchcuda_lab.", "torch.Tensor.", "torch.is", "torch.where",
                     "torch.zeros_like", "torch.full")


def watched():
    """What the comparison and the anti-hacking checks call (see verify.py, antihack.py)."""
    import sys

    import torch

    by_owner = {
        sys.modules[__name__]: ["compare", "tolerance", "poison", "make_inputs", "_same", "_clone", "_tensors",
                 "_stale_outputs", "_check_after_call", "_check_timers", "_check_plain",
                 "_holdout", "_settle"],
        antihack: ["find_fallback", "make_tracer", "overlaps", "storage_span", "live_threads",
                   "new_threads", "op_class", "norm", "numerics_flags", "changed_numerics",
                   "restore_numerics"],
        timing: ["tampered", "time_forward"],
        torch.Tensor: ["__sub__", "__eq__", "__ne__", "__gt__", "__lt__", "__ge__", "__le__",
                       "__or__", "__and__", "__invert__", "abs", "all", "any", "sum", "max", "to",
                       "detach", "clone", "numel", "is_floating_point", "is_complex"],
        torch: ["isnan", "isfinite", "where", "zeros_like", "full"],
    }
    return [(owner, ("torch.Tensor." if owner is torch.Tensor else f"{owner.__name__}."), n)
            for owner, names in by_owner.items() for n in names]


# --- loading -------------------------------------------------------------------------------

def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def _seed(s: int) -> None:
    import torch
    torch.manual_seed(s)


def _to(x: Any, device: str) -> Any:
    import torch
    if isinstance(x, torch.Tensor):
        return x.to(device)
    return x


def make_inputs(prob: Any, device: str) -> list:
    """``get_inputs()`` with new tensors created on ``device`` directly (seeded by the caller).

    Drawing tens of MB on the host and copying them over costs more than the whole check on a
    GPU; tensors the problem pins to a device explicitly are moved afterwards.
    """
    import torch
    if device.startswith("cuda"):
        with torch.device(device):
            xs = prob.get_inputs()
    else:
        xs = prob.get_inputs()
    return [_to(x, device) for x in xs]


def _draw_inputs(prob: Any, device: str) -> list:
    """``make_inputs``; running out of memory there is the problem's size, said in GiB."""
    try:
        return make_inputs(prob, device)
    except BaseException as e:  # noqa: BLE001  (re-raised unless it is out of memory)
        name, detail = classify_exception(e)
        if name != "out_of_memory":
            raise
        import re
        asked = re.search(r"allocate (\d+(?:\.\d+)?) ?(bytes|[KMGT]iB)", detail)
        size = ""
        if asked:
            scale = {"bytes": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}
            size = f" ({float(asked.group(1)) * scale[asked.group(2)] / 2 ** 30:.2f} GiB asked"
            size += f", {_memory_limit_gib(device)})"
        raise _Plain("out_of_memory", f"the problem's get_inputs() needs more memory than the "
                     f"{device} worker may use{size}: {detail}") from None


def _memory_limit_gib(device: str) -> str:
    if device.startswith("cuda"):
        import torch
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        return f"the GPU has {total / 2 ** 30:.2f} GiB"
    import resource
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return "no address-space limit"
    return f"the worker's limit is {soft / 2 ** 30:.2f} GiB"


def _clone(xs: list) -> list:
    import torch
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _tensors(out: Any) -> list:
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _same(a: Any, b: Any) -> bool:
    """Bitwise equality that treats NaN == NaN."""
    import torch
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def tolerance(dtype: Any, atol: float | None, rtol: float | None) -> tuple[float, float]:
    name = str(dtype).replace("torch.", "")
    base = DEFAULT_TOL.get(name, 0.0)
    return (base if atol is None else atol, base if rtol is None else rtol)


def compare(out: Any, ref: Any, atol: float, rtol: float) -> dict:
    """max_abs_err, max_rel_err, mismatches, ok, reason ("" when ok)."""
    import torch
    if out.shape != ref.shape:
        return {"ok": False, "reason": "shape_mismatch", "abs": math.inf, "rel": math.inf,
                "mismatches": ref.numel(), "msg": f"shape {tuple(out.shape)} != {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"ok": False, "reason": "dtype_mismatch", "abs": math.inf, "rel": math.inf,
                "mismatches": ref.numel(), "msg": f"dtype {out.dtype} != {ref.dtype}"}
    # On the device: copying large outputs to the host would dominate the verdict's latency.
    a = out.detach().to(torch.float64)
    b = ref.detach().to(ref.device, torch.float64)
    if a.numel() == 0:
        return {"ok": True, "reason": "", "abs": 0.0, "rel": 0.0, "mismatches": 0, "msg": ""}
    both_nan = torch.isnan(a) & torch.isnan(b)
    diff = (a - b).abs()
    diff = torch.where(both_nan | (a == b), torch.zeros_like(diff), diff)
    bad = (diff > atol + rtol * b.abs()) | (torch.isnan(a) != torch.isnan(b))
    finite = torch.isfinite(diff)
    max_abs = float(diff[finite].max()) if bool(finite.any()) else 0.0
    if not bool(finite.all()):
        max_abs = math.inf
    denom = b.abs()
    sel = finite & (denom > max(atol, 1e-12))
    max_rel = float((diff[sel] / denom[sel]).max()) if bool(sel.any()) else 0.0
    n_bad = int(bad.sum())
    reason, msg = "", ""
    if n_bad:
        unwritten = int((torch.isnan(a) & ~torch.isnan(b)).sum())
        reason = "uninitialized_output" if unwritten else "output_mismatch"
        msg = (f"{n_bad} of {a.numel()} elements out of tolerance (atol={atol:g}, rtol={rtol:g})"
               + (f", {unwritten} NaN where the reference has numbers" if unwritten else ""))
        try:    # where and how they differ, for the Coder; never a reason to fail the job
            where = mismatch.describe(a, b, bad)
        except Exception:  # noqa: BLE001
            where = ""
        if where:
            msg += f"; {where}"
    return {"ok": n_bad == 0, "reason": reason, "abs": max_abs, "rel": max_rel,
            "mismatches": n_bad, "msg": msg}


@contextlib.contextmanager
def nan_filled_empty():
    """During correctness trials, ``torch.empty`` and friends return NaN-filled float memory.

    This is torch's own switch (deterministic mode fills uninitialised memory), so an output the
    candidate allocates but does not fully write shows NaN whatever the allocator hands out;
    ``poison`` alone depends on the allocator reusing the poisoned block. Timing runs without it.
    """
    import torch
    was = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # ops without a deterministic variant only warn
            yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)


def poison(device: str, sizes: list[int]) -> None:
    """Fill memory the allocator will hand out next with NaN (the candidate's outputs come from it).

    For each byte size the reference produced (the sizes a candidate allocates), a block of
    exactly that size is filled and freed: the caching allocator (CUDA) and malloc's bins (CPU)
    give the freed block to the next request of that size. A larger block covers the rest.
    """
    import torch
    blocks = []
    for n in sorted(set(sizes))[:16]:
        blocks.append(torch.full(((n + 3) // 4,), float("nan"), dtype=torch.float32,
                                 device=device))
    extra = min(max(sizes or [0]) * 2, 512 * 1024 * 1024)
    if extra:
        blocks.append(torch.full((extra // 4,), float("nan"), dtype=torch.float32, device=device))
    if device.startswith("cuda"):
        torch.cuda.current_stream().synchronize()
    del blocks


# --- the protocol ----------------------------------------------------------------------------

def run_verify(job: dict, state: WorkerState) -> dict:
    """One candidate against one problem; returns {"verdict": dict, "healthy": bool}."""
    import torch
    opts = VerifyOptions(**job["options"])
    device = state.device
    state.jobs += 1
    jobdir = state.workdir / f"job{state.jobs}"
    jobdir.mkdir(parents=True, exist_ok=True)
    prob_path, cand_path = jobdir / "problem.py", jobdir / "candidate.py"
    prob_path.write_text(job["problem_source"])
    cand_path.write_text(job["candidate_source"])
    base = {"candidate_id": job.get("candidate_id", ""), "device": device}
    timing.restore()
    flags_before = antihack.numerics_flags()
    threads_before = antihack.live_threads()
    names = [f"stitch_problem_{state.jobs}", f"stitch_candidate_{state.jobs}"]
    try:
        with torch.no_grad():
            return _verify(job, opts, state, prob_path, cand_path, names, base, threads_before)
    except Reject as r:
        return {"verdict": _status_verdict("rejected", r.name, r.detail, **base),
                "healthy": r.name not in ("patched_timer", "patched_verifier",
                                                  "background_thread")}
    except BuildError as e:
        return {"verdict": _status_verdict("build_error", "compile_error", e.message,
                                           build_log=e.log, **base), "healthy": True}
    except SyntaxError as e:
        where = f"{Path(e.filename or 'candidate.py').name}:{e.lineno}: " if e.lineno else ""
        return {"verdict": _status_verdict("build_error", "syntax_error", f"{where}{e.msg}",
                                           build_log=_tb(e), **base), "healthy": True}
    except BaseException as e:  # noqa: BLE001  (the candidate's fault, whatever it raised)
        name, detail = classify_exception(e)
        if _build_failure(e):
            return {"verdict": _status_verdict("build_error", "compile_error", detail,
                                               build_log=_tb(e), **base), "healthy": True}
        # after running out of memory the process may hold what the candidate leaked (a global
        # list, a native malloc): the next job gets a fresh worker
        healthy = name not in ("cuda_error", "out_of_memory") and _device_healthy(device)
        return {"verdict": _status_verdict("runtime_error", name, detail, build_log=_tb(e),
                                           **base), "healthy": healthy}
    finally:
        for n in names:
            sys.modules.pop(n, None)
        if timing.tampered():
            timing.restore()
        _NUMERICS.clear()
        if antihack.changed_numerics(flags_before):   # the next job starts from the same switches
            antihack.restore_numerics(flags_before)


def _verify(job, opts, state, prob_path, cand_path, names, base, threads_before) -> dict:
    import torch
    device = state.device
    prob = load_module(prob_path, names[0])
    _NUMERICS.clear()
    _NUMERICS.update(antihack.numerics_flags())   # as the problem left them: the reference's
    t0 = timing._real("time.perf_counter")()
    cand_mod = load_module(cand_path, names[1])
    _check_timers()
    if not hasattr(cand_mod, "ModelNew"):
        raise _Plain("exception", "the candidate defines no ModelNew class")
    replaced = job.get("replaced")
    kept = list(job.get("kept") or []) + [str(k) for k in getattr(cand_mod, "KEPT_OPS", [])]

    _seed(opts.seed)
    init = list(prob.get_init_inputs())
    _seed(opts.seed)
    ref_model = prob.Model(*init).to(device)
    _seed(opts.seed)
    cand_model = cand_mod.ModelNew(*init).to(device)
    _sync(device)
    build_ms = (timing._real("time.perf_counter")() - t0) * 1e3
    _check_timers()

    tracer_ref, tracer_cand = antihack.make_tracer(), antihack.make_tracer()
    trials: list[TrialResult] = []
    snaps, ref_snaps, held, returned = [], [], [], []
    rejects: list[tuple[str, str]] = []
    tol: tuple[float, float] | None = None
    for t in range(max(1, opts.trials)):
        seed = opts.seed + t
        _seed(seed)
        inputs = _draw_inputs(prob, device)
        saved, ref_in, cand_in = _clone(inputs), _clone(inputs), _clone(inputs)
        with tracer_ref:
            ref_out = _tensors(ref_model(*ref_in))
        ref_mutated = {i for i, (a, b) in enumerate(zip(ref_in, saved))
                       if isinstance(a, torch.Tensor) and not _same(a, b)}
        ref_alias = any(antihack.overlaps(o, x) for o in ref_out for x in ref_in
                        if isinstance(x, torch.Tensor))
        if tol is None:
            tol = tolerance(ref_out[0].dtype if ref_out else torch.float32, opts.atol, opts.rtol)
        sizes = [o.numel() * o.element_size() for o in ref_out]

        poison(device, sizes)
        with tracer_cand, nan_filled_empty():
            out = _tensors(cand_model(*cand_in))
        _check_plain(out)
        _settle(device)
        snap = [o.detach().clone() for o in out]
        _check_after_call(device, out, snap, threads_before, first=(t == 0))
        _check_timers()

        if len(out) != len(ref_out):
            trials.append(TrialResult(seed=seed, ok=False, message=(
                f"output_count: {len(out)} outputs, the reference returns {len(ref_out)}")))
            break
        if not ref_alias and any(antihack.overlaps(o, x) for o in out for x in cand_in
                                 if isinstance(x, torch.Tensor)):
            rejects.append(("output_aliasing", "an output shares memory with an input"))
        for i, x in enumerate(cand_in):
            if isinstance(x, torch.Tensor) and i not in ref_mutated and not _same(x, saved[i]):
                rejects.append(("input_mutation", f"input {i} changed during the call (trial {t})"))
        reused = any(antihack.overlaps(o, h) for o in out for h in held)

        res = [compare(o, r, *tol) for o, r in zip(out, ref_out)]
        ok = all(r["ok"] for r in res)
        if not device.startswith("cuda") and any(not _same(o, s) for o, s in zip(out, snap)):
            raise Reject("background_thread", f"outputs changed after the call returned (trial "
                         f"{t}): work still running outside Python's threads")
        if reused:
            rejects.append(("output_aliasing" if ok else "cached_output",
                            "an output reuses the memory of an earlier call's output"))
        msg = "; ".join(f"{r['reason']}: {r['msg']}" for r in res if not r["ok"])

        # determinism: a second call on the same inputs
        again_in = _clone(saved)
        poison(device, sizes)
        with tracer_cand, nan_filled_empty():
            out2 = _tensors(cand_model(*again_in))
        _check_plain(out2)
        _settle(device)
        if any(antihack.overlaps(a, b) for a in out2 for b in out):
            rejects.append(("cached_output" if not ok else "output_aliasing",
                            "a second call returned the first call's output memory"))
        elif ok and len(out2) == len(out):
            for a, b in zip(out2, snap):
                if not _same(a, b) and not compare(a, b, *tol)["ok"]:
                    ok, msg = False, "nondeterministic: a second call on the same inputs differs"
        held.extend(out + out2)
        returned.append(out)
        snaps.append(snap)
        ref_snaps.append([r.detach().clone() for r in ref_out])
        trials.append(TrialResult(
            seed=seed, ok=ok, max_abs_err=max((r["abs"] for r in res), default=0.0),
            max_rel_err=max((r["rel"] for r in res), default=0.0),
            mismatches=sum(r["mismatches"] for r in res), message=msg))
        if rejects:
            break

    _check_after_call(device, [], [], threads_before, first=False)
    if not device.startswith("cuda"):   # native threads finish late: look once more, later
        time.sleep(0.02)
        for t, (out, snap) in enumerate(zip(returned, snaps)):
            if any(not _same(o, s) for o, s in zip(out, snap)):
                raise Reject("background_thread", f"outputs of trial {t} changed after the "
                             "call returned: work still running outside Python's threads")
    aten_ops = dict(sorted(tracer_cand.counts.items()))
    fallback = antihack.find_fallback(aten_ops, replaced=replaced, kept=kept,
                                      reference_ops=tracer_ref.counts)
    if fallback:
        rejects.append(("pytorch_fallback", "ran " + ", ".join(
            f"{op} x{aten_ops[op]}" for op in fallback[:8])))
    rejects += _stale_outputs(trials, snaps, ref_snaps)

    result = dict(base, trials=trials, aten_ops=aten_ops, atol=tol[0] if tol else None,
                  rtol=tol[1] if tol else None)
    finite = [t.max_abs_err for t in trials]
    result["max_abs_err"] = max(finite) if finite else None
    result["max_rel_err"] = max((t.max_rel_err for t in trials), default=None)
    result["timings"] = {"build": build_ms}
    if rejects:
        name, detail = rejects[0]
        return {"verdict": Verdict(status="rejected", reason=f"{name}: {detail}", **result)
                .to_dict(), "healthy": True}
    bad = [t for t in trials if not t.ok]
    if bad:
        return {"verdict": Verdict(status="incorrect", reason=_first_reason(bad[0].message)
                                   + f" (seed {bad[0].seed})", **result).to_dict(),
                "healthy": True}

    # --- correct: profile-based checks, timing, profiles ---
    _seed(opts.seed)
    inputs = make_inputs(prob, device)
    prof: dict[str, Any] = {}
    if device.startswith("cuda") or opts.profile:
        ref_key = ("trace", _digest(job["problem_source"]), device, opts.seed)
        if ref_key not in state.baselines:  # the reference's profile is the same every time
            state.baselines[ref_key] = profile.profile_forward(ref_model, _clone(inputs), device)
        ref_trace = state.baselines[ref_key]
        cand_trace = profile.profile_forward(cand_model, _clone(inputs), device)
        if device.startswith("cuda"):
            extra = profile.unjoined_streams(cand_trace, ref_trace)
            if extra:
                raise Reject("side_stream", f"kernels on stream(s) {', '.join(extra)} "
                             "were never joined to the current stream")
            strict = replaced is None or "*" in {antihack.norm(r) for r in replaced}
            hidden = profile.pytorch_kernels(cand_trace) if strict and not kept else []
            if hidden:
                raise Reject("pytorch_fallback", "PyTorch kernels ran outside the dispatcher: "
                             + ", ".join(hidden[:3]))
        if opts.profile:
            from .. import trace as trace_mod
            from . import ncu
            prof = {"reference": profile.rows(ref_trace), "candidate": profile.rows(cand_trace),
                    "kernels": trace_mod.kernel_summary(cand_trace),
                    "reference_kernels": trace_mod.kernel_summary(ref_trace, top=10),
                    "ncu": ncu.run(prob_path, cand_path, seed=opts.seed, enabled=opts.ncu,
                                   device=device)}
    timings, flags = {"build": build_ms}, []
    if opts.time:
        timings.update(baselines(prob, ref_model, inputs, job["problem_source"], opts, state,
                                 flags))
        before_ours = antihack.live_threads()  # compile baselines may leave worker threads
        ours = timing.time_forward(cand_model, _clone(inputs), device,
                                   trials=opts.timing_trials, warmup=opts.warmup)
        timings["ours"], timings["ours_wall"] = ours["ms"], ours["wall_ms"]
        _check_timers()
        _check_after_call(device, [], [], before_ours, first=False)
    _holdout(prob, ref_model, cand_model, inputs, device, opts, tol)
    result.update(timings=timings, profile=prof, correct=True, flags=flags)
    if "ours" in timings and timings["ours"] > 0:
        if "eager" in timings:
            result["speedup_vs_eager"] = timings["eager"] / timings["ours"]
        comp = timings.get("compile:default") or min(
            (v for k, v in timings.items() if k.startswith("compile:") and not k.endswith("_wall")),
            default=None)
        if comp:
            result["speedup_vs_compile"] = comp / timings["ours"]
        if max(result.get("speedup_vs_eager") or 0, result.get("speedup_vs_compile") or 0) > 10:
            flags.append("speedup_over_10x")
    return {"verdict": Verdict(status="pass", **result).to_dict(), "healthy": True}


def baselines(prob, ref_model, inputs, problem_source: str, opts: VerifyOptions,
              state: WorkerState, flags: list | None = None) -> dict[str, float]:
    """Eager and torch.compile timings, cached per (problem, device, options) in this worker."""
    import torch
    key = (_digest(problem_source), state.device, opts.compile_modes,
           opts.timing_trials, opts.warmup, opts.seed)
    if key in state.baselines:
        cached = state.baselines[key]
        if flags is not None:
            flags.extend(cached.get("_flags", []))
        return {k: v for k, v in cached.items() if k != "_flags"}
    out: dict[str, Any] = {}
    eager = timing.time_forward(ref_model, _clone(inputs), state.device,
                                trials=opts.timing_trials, warmup=opts.warmup)
    out["eager"], out["eager_wall"] = eager["ms"], eager["wall_ms"]
    notes = []
    for mode in opts.modes():
        try:
            compiled = torch.compile(ref_model, mode=None if mode == "default" else mode)
            r = timing.time_forward(compiled, _clone(inputs), state.device,
                                    trials=opts.timing_trials, warmup=max(2, opts.warmup))
            out[f"compile:{mode}"], out[f"compile:{mode}_wall"] = r["ms"], r["wall_ms"]
        except Exception as e:  # noqa: BLE001  (a baseline that cannot compile is noted, not fatal)
            notes.append(f"compile_failed:{mode}")
            print(f"torch.compile mode={mode} failed: {e}", file=sys.stderr)
    out["_flags"] = notes
    state.baselines[key] = out
    if flags is not None:
        flags.extend(notes)
    return {k: v for k, v in out.items() if k != "_flags"}


def run_baseline(job: dict, state: WorkerState) -> dict:
    import torch
    opts = VerifyOptions(**job["options"])
    state.jobs += 1
    path = state.workdir / f"job{state.jobs}" / "problem.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job["problem_source"])
    name = f"stitch_problem_{state.jobs}"
    try:
        prob = load_module(path, name)
        with torch.no_grad():
            _seed(opts.seed)
            init = list(prob.get_init_inputs())
            _seed(opts.seed)
            model = prob.Model(*init).to(state.device)
            _seed(opts.seed)
            inputs = make_inputs(prob, state.device)
            return {"timings": baselines(prob, model, inputs, job["problem_source"], opts, state),
                    "healthy": True}
    finally:
        sys.modules.pop(name, None)


# --- checks ----------------------------------------------------------------------------------

class _Plain(Exception):
    def __init__(self, name: str, detail: str):
        self.name, self.detail = name, detail
        super().__init__(detail)


_NUMERICS: dict[str, Any] = {}   # precision switches as the problem module left them


def _check_timers() -> None:
    """Timers, the Verifier's own functions and the global precision switches are untouched."""
    changed = antihack.changed_numerics(_NUMERICS) if _NUMERICS else []
    if changed:
        raise Reject("numerics_flags", "; ".join(changed[:3]))
    bad = timing.tampered()
    ours = [b for b in bad if b.startswith(VERIFIER_PREFIXES)]
    if ours:
        raise Reject("patched_verifier", "replaced " + ", ".join(ours[:6]))
    if bad:
        raise Reject("patched_timer", "replaced " + ", ".join(bad))


def _check_plain(out: list) -> None:
    """Outputs must be plain tensors: a subclass can defer its work until it is read."""
    import torch
    odd = sorted({type(o).__name__ for o in out if type(o) is not torch.Tensor})
    if odd:
        raise Reject("tensor_subclass", f"forward returned {', '.join(odd)} instead of "
                     "torch.Tensor (its values could be computed later, outside the timer)")


def _holdout(prob, ref_model, cand_model, inputs, device: str, opts: VerifyOptions,
             tol: tuple[float, float]) -> None:
    """One more call, after timing, on inputs from a seed nobody could know in advance."""
    import secrets
    seed = opts.seed + 1000 + secrets.randbelow(1 << 30)
    _seed(seed)
    fresh = make_inputs(prob, device)
    ref = _tensors(ref_model(*_clone(fresh)))
    poison(device, [r.numel() * r.element_size() for r in ref])
    out = _tensors(cand_model(*_clone(fresh)))
    _check_plain(out)
    _settle(device)
    _check_timers()
    if len(out) == len(ref) and all(compare(o, r, *tol)["ok"] for o, r in zip(out, ref)):
        return
    earlier = _tensors(ref_model(*_clone(inputs)))   # the inputs the timed calls used
    if len(out) == len(earlier) and all(compare(o, r, *tol)["ok"]
                                        for o, r in zip(out, earlier)):
        raise Reject("cached_output", f"after the timed calls it returned their result for new "
                     f"inputs (held-out seed {seed})")
    raise Reject("hardcoded_output", f"correct on the recorded seeds, wrong on inputs from the "
                 f"held-out seed {seed}")


def _check_after_call(device: str, out: list, snap: list, before: set, first: bool) -> None:
    started = antihack.new_threads(before)
    if started:
        raise Reject("background_thread", "threads still running after the call: "
                     + ", ".join(started[:4]))
    if device.startswith("cuda") and out:
        timing._real("torch.cuda.synchronize")()  # now every stream has finished
        if any(not _same(o, s) for o, s in zip(out, snap)):
            raise Reject("side_stream", "outputs changed after the current stream was synchronised"
                         " (work left on another stream)")
    elif first and out:
        time.sleep(0.05)
        if any(not _same(o, s) for o, s in zip(out, snap)):
            raise Reject("background_thread", "outputs changed after the call returned")


def _stale_outputs(trials: list, snaps: list, ref_snaps: list) -> list[tuple[str, str]]:
    """Identical outputs for different inputs where the reference's differ."""
    for t in range(1, len(snaps)):
        if trials[t].ok:
            continue
        for u in range(t):
            same_out = len(snaps[t]) == len(snaps[u]) and all(
                _same(a, b) for a, b in zip(snaps[t], snaps[u]))
            ref_differs = any(not _same(a, b) for a, b in zip(ref_snaps[t], ref_snaps[u]))
            if same_out and ref_differs:
                if any(tr.ok for tr in trials[:t]):
                    return [("cached_output", f"trial {t} returned trial {u}'s result for new "
                             "inputs")]
                return [("constant_output", f"trials {u} and {t} returned the same output for "
                         "different inputs")]
    return []


def _digest(source: str) -> str:
    import hashlib
    return hashlib.sha256(source.encode()).hexdigest()


def _first_reason(message: str) -> str:
    return message.split(";")[0] if message else "output_mismatch"


def _settle(device: str) -> None:
    """Synchronise only torch's current stream (what a caller of the model may rely on)."""
    if device.startswith("cuda"):
        import torch
        torch.cuda.current_stream().synchronize()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        timing._real("torch.cuda.synchronize")()


def _device_healthy(device: str) -> bool:
    if not device.startswith("cuda"):
        return True
    try:
        import torch
        torch.cuda.synchronize()
        (torch.ones(1, device=device) + 1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


def classify_exception(e: BaseException) -> tuple[str, str]:
    if isinstance(e, _Plain):
        return e.name, e.detail
    text = f"{type(e).__name__}: {e}"
    low = text.lower()
    if "out of memory" in low or "can't allocate memory" in low or isinstance(e, MemoryError) \
            or type(e).__name__ == "OutOfMemoryError":
        return "out_of_memory", _one_line(text)
    if "cuda error" in low or "cuda_error" in low or "illegal memory access" in low \
            or "cudaerror" in low:
        return "cuda_error", _one_line(text)
    where = _candidate_line(e)
    return "exception", (where + _one_line(text))


def _build_failure(e: BaseException) -> bool:
    return "Error building extension" in str(e)


def _candidate_line(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    for fr in reversed(tb):
        if fr.filename.endswith("candidate.py"):
            return f"candidate.py:{fr.lineno}: "
    return ""


def _one_line(s: str, n: int = 400) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _tb(e: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text[-limit:]
