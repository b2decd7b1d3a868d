"""Judging outputs against the reference: tolerances per dtype and per scale, and comparison.

Tolerances (``tolerance``), each stated in the verdict with its reason:

- float32: atol = rtol = 1e-4 (KernelBench's and CUDA Agent's fp32 contract);
- float16 / bfloat16: 1e-2 (KernelBench's half-precision contract; bf16 keeps 8 bits);
- float64: 1e-9, not float32's 1e-4: a float64 problem asks for float64 accuracy, and a
  float32 computation (relative error near 6e-8 from rounding alone, about 1e-5 after a
  reduction) must not pass it, while float64 work in another order stays near 1e-13;
- complex: the tolerance of its parts' dtype, on the real and imaginary parts both;
- integers and bool: exact.

Elementwise, an output passes where ``|out - ref| <= atol + rtol * |ref|``. On its own that lets
a low-precision computation hide under ``atol`` when the outputs are small (a bf16 softmax whose
values are about 1e-4 each passes at 1.8% relative error), so each output is also judged against
its own magnitude, twice: ``atol`` is scaled by the output's root-mean-square when that is
below 1 (a softmax tail off by 20x does not hide under an atol larger than the outputs; rtol
still allows each element its own relative error),
and ``||out - ref|| / ||ref|| <= rtol`` (Frobenius norms; skipped when the reference is all
zeros, where the elementwise test is already exact enough).
"""

from __future__ import annotations

import math
from typing import Any

from . import mismatch

TOLERANCE = {"float32": (1e-4, "float32: atol = rtol = 1e-4 (KernelBench's fp32 contract)"),
             "float64": (1e-9, "float64: 1e-9 (a float32 computation must not pass)"),
             "complex64": (1e-4, "complex64: 1e-4 on real and imaginary parts (float32's)"),
             "complex128": (1e-9, "complex128: 1e-9 on real and imaginary parts (float64's)"),
             "float16": (1e-2, "float16: 1e-2 (KernelBench's half-precision contract)"),
             "bfloat16": (1e-2, "bfloat16: 1e-2 (KernelBench's half-precision contract)")}


def tolerance(dtype: Any, atol: float | None = None,
              rtol: float | None = None) -> tuple[float, float, str]:
    """(atol, rtol, why) for outputs of ``dtype``; explicit values override the defaults."""
    name = str(dtype).replace("torch.", "")
    base, why = TOLERANCE.get(name, (0.0, f"{name}: exact"))
    if atol is not None or rtol is not None:
        why = f"{name}: set by the caller"
    return (base if atol is None else atol, base if rtol is None else rtol, why)


def same(a: Any, b: Any) -> bool:
    """Bitwise equality that treats NaN == NaN."""
    import torch
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def compare(out: Any, ref: Any, atol: float, rtol: float) -> dict:
    """max_abs_err, max_rel_err, norm_rel_err, mismatches, ok, reason ("" when ok), msg."""
    import torch
    if out.shape != ref.shape:
        return _fail("shape_mismatch", ref, f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return _fail("dtype_mismatch", ref, f"dtype {out.dtype} != {ref.dtype}")
    # On the device: copying large outputs to the host would dominate the verdict's latency.
    if ref.is_complex():      # both parts count: a cast to float64 would keep the real part only
        out, ref = torch.view_as_real(out.detach()), torch.view_as_real(ref.detach())
    a = out.detach().to(ref.device, torch.float64)
    b = ref.detach().to(torch.float64)
    if a.numel() == 0:
        return {"ok": True, "reason": "", "abs": 0.0, "rel": 0.0, "norm_rel": 0.0,
                "mismatches": 0, "msg": ""}
    fin = b[torch.isfinite(b)]
    rms = float(fin.square().mean().sqrt()) if fin.numel() else 1.0
    atol = atol * min(1.0, rms) if rms > 0 else atol
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
    fin_b = torch.where(torch.isfinite(b), b, torch.zeros_like(b))
    ref_norm = float(torch.linalg.vector_norm(fin_b))
    norm_rel = float(torch.linalg.vector_norm(torch.where(finite, diff, torch.zeros_like(diff)))
                     ) / ref_norm if ref_norm > 0 else 0.0
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
    elif rtol > 0 and norm_rel > rtol:
        reason = "output_mismatch"
        msg = (f"relative error {norm_rel:.2e} over the whole output (||out - ref|| / ||ref||) "
               f"is above rtol={rtol:g}, though every element is within atol: the outputs are "
               "small, and the computation is less precise than the reference")
    return {"ok": not reason, "reason": reason, "abs": max_abs, "rel": max_rel,
            "norm_rel": norm_rel, "mismatches": n_bad, "msg": msg}


def _fail(reason: str, ref: Any, msg: str) -> dict:
    return {"ok": False, "reason": reason, "abs": math.inf, "rel": math.inf, "norm_rel": math.inf,
            "mismatches": ref.numel(), "msg": msg}


class Print:
    """What ``stale_outputs`` keeps of a trial's output instead of the output: its shape,
    dtype, sum and a strided sample of 4096 elements. A trial's outputs can be GBs; all the
    trials' outputs and references would not fit on the GPU beside the candidate's.

    Two prints are equal when the outputs are (and, with the odds of a sample and a sum both
    agreeing by chance, only then); they name the reason of a trial that failed anyway.
    """

    def __init__(self, t: Any):
        import torch
        flat = t.detach().reshape(-1)
        self.dtype = t.dtype
        step = max(1, flat.numel() // 4096)
        sample = flat[::step][:4096].cpu()
        if flat.is_complex():
            total = torch.view_as_real(flat).sum(dtype=torch.float64)
        elif flat.dtype == torch.bool:
            total = flat.sum()
        else:
            total = flat.sum(dtype=torch.float64)
        # repr: NaN equals NaN here, as in `same`
        self.key = (tuple(t.shape), str(t.dtype), repr(total.item()),
                    sample.contiguous().view(torch.uint8).numpy().tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Print) and self.key == other.key

    __hash__ = None   # type: ignore[assignment]


def stale_outputs(outs: list[list], refs: list[list], oks: list[bool]) -> tuple[str, str] | None:
    """Identical outputs for different inputs where the reference's differ: (name, detail).
    ``outs`` and ``refs`` hold one ``Print`` per output of each trial."""
    for t in range(1, len(outs)):
        if oks[t] or not outs[t]:
            continue
        for u in range(t):
            same_out = len(outs[t]) == len(outs[u]) and all(
                a == b for a, b in zip(outs[t], outs[u]))
            ref_differs = any(a != b for a, b in zip(refs[t], refs[u]))
            if same_out and ref_differs:
                if any(oks[:t]):
                    return ("cached_output", f"trial {t} returned trial {u}'s result for new "
                            "inputs")
                return ("constant_output", f"trials {u} and {t} returned the same output for "
                        "different inputs")
    return None
