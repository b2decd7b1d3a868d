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
zeros, where the elementwise test is already exact enough). And where a few huge values keep
atol unscaled, the small ones are still judged: more than 2% of the elements above the output's
rounding noise off by more than ten times rtol of themselves is a mismatch (``FAR_SHARE``).

Where the reference is itself less exact than its tolerance (PyTorch runs fp32 convolutions on
TF32 tensor cores by default; a long fp32 sum or scan carries its own rounding), an output that
fails against the reference may pass against the same forward computed in float64, within the
tolerance plus a few times the reference's own error (``within_reference_error``): no candidate
can be asked to agree with the reference more closely than the reference agrees with exact
arithmetic, and a narrower format (bf16, eight times TF32's error) is still too far. The
verdict's tolerance says when this was used, with the reference's error.
"""

from __future__ import annotations

import math
from typing import Any

from ..verdict import SCALED_ATOL
from . import mismatch

TOLERANCE = {"float32": (1e-4, "float32: atol = rtol = 1e-4 (KernelBench's fp32 contract)"),
             "float64": (1e-9, "float64: 1e-9 (a float32 computation must not pass)"),
             "complex64": (1e-4, "complex64: 1e-4 on real and imaginary parts (float32's)"),
             "complex128": (1e-9, "complex128: 1e-9 on real and imaginary parts (float64's)"),
             "float16": (1e-2, "float16: 1e-2 (KernelBench's half-precision contract)"),
             "bfloat16": (1e-2, "bfloat16: 1e-2 (KernelBench's half-precision contract)")}


# Elements off by more than FAR_RTOLS times rtol of themselves: an honest program has a few (a
# result of cancellation near zero, a denormal flushed to zero: 0.26% of exp(32 * randn)); a
# program that drops its small values, or computes them cruder, has many, each within an atol
# that the output's larger values keep unscaled (a few near 1e38, or a root mean square of 500
# over outputs down to 3e-4): more than FAR_SHARE of the nonzero elements, and more than
# FAR_LEAST, is a mismatch against the reference. Where the reference is the less exact of the
# two, the float64 rule judges next (``within_reference_error``).
FAR_RTOLS = 10
FAR_SHARE = 0.02
NOISE_ULPS = 8
FAR_LEAST = 16


def tolerance(dtype: Any, atol: float | None = None,
              rtol: float | None = None) -> tuple[float, float, str]:
    """(atol, rtol, why) for outputs of ``dtype``; explicit values override the defaults."""
    name = str(dtype).replace("torch.", "")
    base, why = TOLERANCE.get(name, (0.0, f"{name}: exact"))
    if atol is not None or rtol is not None:
        why = f"{name}: set by the caller"
    return (base if atol is None else atol, base if rtol is None else rtol, why)


def same(a: Any, b: Any) -> bool:
    """Bitwise equality that treats NaN == NaN. In pieces of CHUNK elements: whole, its
    masks took three bytes per element beside the two tensors (6 GiB more for 2 billion
    elements, which ran the judge out of GPU memory beside a candidate's process)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return _same_pieces(a, b)


def _same_pieces(a: Any, b: Any) -> bool:
    """``same`` over views of at most about ``_chunk`` elements: flat where both are
    contiguous, else slices along the first dim (a reshape would copy a channels-last output
    whole)."""
    if a.numel() <= _chunk(a) or a.dim() == 0:
        return _same_whole(a, b)
    if a.is_contiguous() and b.is_contiguous():
        fa, fb = a.view(-1), b.view(-1)
        return all(_same_whole(fa[s], fb[s]) for s in _chunks(fa))
    rows = _chunk(a) // max(1, a.numel() // a.shape[0])
    if rows < 1:   # one slice is larger than a piece: each in pieces of its own
        return all(_same_pieces(a[i], b[i]) for i in range(a.shape[0]))
    return all(_same_whole(a[i:i + rows], b[i:i + rows]) for i in range(0, a.shape[0], rows))


def _same_whole(a: Any, b: Any) -> bool:
    import torch
    if not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


CHUNK = 1 << 24   # elements compared at a time on a GPU: 128 MB per float64 copy, on any size
# on the CPU, 2 MB per float64 copy: each of a chunk's dozen passes runs in cache, in memory
# the allocator hands back, where chunks of 128 MB fault in fresh pages every time (a 4M-element
# output compared in 86 ms instead of 221, 16M in 299 instead of 914, on two cores)
CPU_CHUNK = 1 << 18


def _flat(out: Any, ref: Any) -> tuple[Any, Any]:
    """Both tensors as flat views (complex as their real and imaginary parts: a cast to float64
    would keep the real part only), ``out`` on the reference's device."""
    import torch
    if ref.is_complex():
        out, ref = torch.view_as_real(out.detach()), torch.view_as_real(ref.detach())
    return out.detach().to(ref.device).reshape(-1), ref.detach().reshape(-1)


def _chunk(t: Any) -> int:
    return CPU_CHUNK if t.device.type == "cpu" else CHUNK


def _chunks(t: Any):
    """Slices of ``t``'s flat view, each of ``_chunk(t)`` elements or fewer."""
    n, step = t.numel(), _chunk(t)
    for i in range(0, n, step):
        yield slice(i, min(n, i + step))


def _atol_text(atol: float, given: float, rms: float) -> str:
    """``atol=...`` as used, saying where it was scaled down to the reference's own size (the
    verdict's header states the tolerance as given)."""
    if atol < given:
        return f"atol={atol:g}: {given:g} {SCALED_ATOL} {rms:.3g}"
    return f"atol={atol:g}"


def _noise_floor(b: Any) -> float:
    """The least size of an element the far-off count judges (``compare``): NOISE_ULPS units
    in the last place of the median size of the finite elements (a strided sample of at most
    about a million), and no less than the dtype's least normal number."""
    import torch
    flat = b.reshape(-1)
    sample = flat[::max(1, flat.numel() >> 20)].abs().to(torch.float64)
    sample = sample[torch.isfinite(sample)]
    info = torch.finfo(b.dtype)
    median = float(sample.median()) if sample.numel() else 0.0
    return max(info.tiny, NOISE_ULPS * info.eps * median)


def _rms(b: Any) -> float:
    """Root mean square of the finite elements of ``b`` (1.0 when there are none)."""
    import torch
    total, count = 0.0, 0
    for s in _chunks(b):
        x = b[s].to(torch.float64)
        if bool(torch.isfinite(x).all()):
            total += float(torch.dot(x, x))
            count += x.numel()
            continue
        fin = x[torch.isfinite(x)]
        total += float(fin.square().sum())
        count += fin.numel()
    return math.sqrt(total / count) if count else 1.0


def compare(out: Any, ref: Any, atol: float, rtol: float, far: bool = True) -> dict:
    """max_abs_err, max_rel_err, norm_rel_err, mismatches, ok, reason ("" when ok), msg.

    ``far``: count the small values far off where atol stays unscaled (``FAR_SHARE``); not on
    a widened draw, whose far ways make outputs far smaller than the draw's, where a formula
    exact to the draw's rounding (``x (1 + tanh(x / 2)) / 2`` for silu) loses their relative
    precision honestly (candidates/pass_silu_tanh_rewrite.py).

    Works through the outputs a chunk at a time, on their device: an output of billions of
    elements compared whole in float64 would need tens of GB beside the reference's."""
    import torch
    if out.shape != ref.shape:
        return _fail("shape_mismatch", ref, f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return _fail("dtype_mismatch", ref, f"dtype {out.dtype} != {ref.dtype}")
    a, b = _flat(out, ref)
    if a.numel() == 0:
        return {"ok": True, "reason": "", "abs": 0.0, "rel": 0.0, "norm_rel": 0.0,
                "mismatches": 0, "msg": ""}
    rms, given = _rms(b), atol
    atol = atol * min(1.0, rms) if rms > 0 else atol
    # only where atol was left unscaled (the outputs' RMS is 1 or more), and only elements
    # above the output's noise: NOISE_ULPS units in the last place of its median size (a zero
    # of exact arithmetic is rounding noise in the reference) and above the subnormals (a
    # flush to zero is a precision of its own)
    far_off = FAR_RTOLS * rtol if far and rtol > 0 and rms >= 1.0 and b.is_floating_point() \
        else math.inf
    small = _noise_floor(b) if math.isfinite(far_off) else math.inf
    n_bad = unwritten = n_far = nonzero = 0
    max_abs = max_rel = 0.0
    all_finite = True
    diff_sq = ref_sq = 0.0
    for s in _chunks(a):
        if a.is_floating_point() and bool(torch.isfinite(a[s]).all()) \
                and bool(torch.isfinite(b[s]).all()):
            # the usual chunk: every value finite, so none of the NaN and infinity cases
            # below can arise and five passes in float64 give the same numbers as twenty
            x, y = a[s].to(torch.float64), b[s].to(torch.float64)
            diff = (x - y).abs_()
            size = y.abs()
            n_bad += int((diff > size * rtol + atol).sum())
            n_far += int((diff > far_off * size).logical_and_(size >= small).sum())
            nonzero += int((size >= small).sum())
            max_abs = max(max_abs, float(diff.max()))
            rel = torch.where(size > max(atol, 1e-12), diff / size, 0.0)
            max_rel = max(max_rel, float(rel.max()))
            diff_sq += float(torch.dot(diff, diff))
            ref_sq += float(torch.dot(y, y))
            continue
        bad, diff, x, y = _bad(a[s], b[s], atol, rtol, 0.0)
        n_bad += int(bad.sum())
        unwritten += int((torch.isnan(x) & ~torch.isnan(y)).sum())
        finite = torch.isfinite(diff)
        size = torch.where(torch.isfinite(y), y.abs(), torch.zeros_like(y))
        n_far += int(((diff > far_off * size) & finite & (size >= small)).sum())
        nonzero += int((size >= small).sum())
        all_finite = all_finite and bool(finite.all())
        if bool(finite.any()):
            max_abs = max(max_abs, float(diff[finite].max()))
        sel = finite & (y.abs() > max(atol, 1e-12))
        if bool(sel.any()):
            max_rel = max(max_rel, float((diff[sel] / y.abs()[sel]).max()))
        diff_sq += float(torch.where(finite, diff, torch.zeros_like(diff)).square().sum())
        ref_sq += float(torch.where(torch.isfinite(y), y, torch.zeros_like(y)).square().sum())
    if not all_finite:
        max_abs = math.inf
    ref_norm = math.sqrt(ref_sq)
    norm_rel = math.sqrt(diff_sq) / ref_norm if ref_norm > 0 else 0.0
    reason, msg = "", ""
    if n_bad:
        reason = "uninitialized_output" if unwritten else "output_mismatch"
        msg = (f"{n_bad} of {a.numel()} elements out of tolerance "
               f"({_atol_text(atol, given, rms)}, rtol={rtol:g})"
               + (f", {unwritten} NaN where the reference has numbers" if unwritten else ""))
        msg += _where(out, ref, atol, rtol, 0.0, None)
    elif rtol > 0 and norm_rel > rtol:
        reason = "output_mismatch"
        msg = (f"relative error {norm_rel:.2e} over the whole output (||out - ref|| / ||ref||) "
               f"is above rtol={rtol:g}, though every element is within atol: the outputs are "
               "small, and the computation is less precise than the reference")
    elif n_far > max(FAR_SHARE * nonzero, FAR_LEAST):
        reason = "output_mismatch"
        msg = (f"{n_far} of the {nonzero} reference elements above its noise are off by more than "
               f"{far_off:g} of themselves, though every element is within atol "
               f"({_atol_text(atol, given, rms)}): the output's small values are wrong, "
               "hidden under an atol its largest values keep")
    return {"ok": not reason, "reason": reason, "abs": max_abs, "rel": max_rel,
            "norm_rel": norm_rel, "mismatches": n_bad, "msg": msg}


def _bad(a: Any, b: Any, atol: float, rtol: float, slack: Any) -> tuple:
    """(mask of elements out of tolerance, |a - b|, a, b in float64) for one chunk; ``slack``
    is a number, or a function of the chunk's float64 ``b`` giving each element's."""
    import torch
    x, y = a.to(torch.float64), b.to(torch.float64)
    if callable(slack):
        slack = slack(y)
    if not (b.is_floating_point() or b.is_complex()) and atol == rtol == slack == 0:
        # integers and bools are exact, compared in their own type: float64 keeps 53 bits,
        # and two int64 values 512 apart near 2^62 are one double
        bad = a.to(b.device) != b
        diff = torch.where(bad, (x - y).abs().clamp_min(1.0), torch.zeros_like(x))
        return bad, diff, x, y
    both_nan = torch.isnan(x) & torch.isnan(y)
    diff = (x - y).abs()
    diff = torch.where(both_nan | (x == y), torch.zeros_like(diff), diff)
    # an infinite reference makes the bound infinite too: any number but NaN was within it
    bad = ((diff > atol + slack + rtol * y.abs()) | (torch.isnan(x) != torch.isnan(y))
           | (torch.isinf(y) & (x != y)))
    return bad, diff, x, y


def _where(out: Any, ref: Any, atol: float, rtol: float, slack: Any, against: Any) -> str:
    """``mismatch.describe`` of the elements out of tolerance, for the Coder; never a reason to
    fail the job (its mask is one byte per element, made only when something is wrong)."""
    import torch
    try:
        a, b = _flat(out, ref if against is None else against)
        bad = torch.empty(a.numel(), dtype=torch.bool, device=b.device)
        for s in _chunks(a):
            bad[s] = _bad(a[s], b[s], atol, rtol, slack)[0]
        shape = list(ref.shape) + ([2] if ref.is_complex() else [])
        where = mismatch.describe(a.reshape(shape), b.reshape(shape), bad.reshape(shape))
    except Exception:  # noqa: BLE001
        where = ""
    return f"; {where}" if where else ""


# How much more error than the reference's own a candidate may have, where the reference is
# less exact than its tolerance. Tensor-core kernels read fp32 operands as TF32 either rounded
# to nearest or truncated, and truncation has about 2.6 times the error in norm (2.4-2.9 times
# in the largest element, in tests/verifier/test_compare.py's convolution-sized sums); another
# order of the same arithmetic changes it by a few percent. A narrower format is further: bf16
# (8 significant bits against TF32's 11) is about 8 times the error.
NORM_FACTOR = 3.0     # ||out - float64|| may be this many times the reference's
# ... and each element's error this many times the reference's 99.9th percentile (a quantile,
# not the largest: a few large errors of the reference must not become every element's
# allowance; the largest of 1e8 rounding errors is about twice that quantile)
PEAK_FACTOR = 6.0
PEAK_QUANTILE = 0.999
QUANTILE_SAMPLE = 1 << 20   # elements the quantile is taken over (strided over the output)
SIZE_SAMPLE = 1 << 18       # ... and the allowance by size (one quantile per binary exponent)
SIZE_SET = 1000             # the fewest outputs an allowance by size is taken over
# ... and the share of the elements that may miss the allowance of their size (while within
# the one of all sizes): another order's cancellations on a few small outputs, not a dropped
# range of them
SIZED_SHARE = 1e-3
# A reference further than this from its float64 run (relative norm) is not "less precise" but
# different (a random draw in the forward, a chaotic result): there its own error allows nothing.
MAX_REFERENCE_ERROR = 1e-2
# ... nor where its largest error is this many times its typical one: rounding spreads over
# the elements (4-5x in tests/verifier/test_compare.py's sums and products), while a discrete
# choice the float64 run makes otherwise (a tie in a max, a threshold) puts a few large errors
# in a sea of small ones, and its largest error must not become every element's allowance
MAX_TAIL = 64.0
TAIL_FLOOR = 1e-3   # ... its errors relative to their element's size, at least this share of
                    # the output's root mean square
# There the candidate is held to the tolerance against float64 with no allowance per element,
# on all but this many times as many elements as the reference misses it on (another order of
# the same sums misses it on about as many, a few percent more or less; 1% off everywhere, on
# all of them), and to the norm below
TAIL_MISSES = 2.0
# ... and no element may miss by more than this share of its size plus the reference's typical
# error, or NORM_FACTOR times the reference's largest such miss if that is more. Not a norm of
# those errors: at a cancellation (an output near 0 among terms 1e6 times its size) any order's
# error is large against the output, and one such element makes the whole norm, so two orders'
# norms differ by what one element's rounding does (up to 16x in 700 draws of
# tests/adversarial's decayed_states, where the largest miss of an honest order was 0.15 and
# the reference's 0.45 of this measure); an output zeroed or of the wrong sign is 0.5 or more
TAIL_MISS_SIZE = 0.5
# ... and no more than this many times as many elements as the reference may miss by more
# than TAIL_LARGE of that measure (at least TAIL_LARGE_LEAST: an honest order's largest was
# over 0.1 on 1 draw in 700, on one element): a hundred outputs each 45% off are within the
# bound above, and their count within the reference's misses
# (candidates/tail_misses_scaled_on_small_outputs.py)
TAIL_LARGE = 0.1
TAIL_LARGE_LEAST = 4
# A reference whose float64 result is less than this share of its error (in norm) is all
# rounding noise, 0 in exact arithmetic (the mean of a normalised tensor): any other order of
# the same sums gives other noise, and an output is judged by its distance from the float64
# result (``_within_noise``) ...
NOISE_SHARE = 1e-2
# ... which may be this many times the reference's: the noise of fp32 sums depends on their
# order (against the reference's blocked, vectorised sums, tests/verifier/test_compare.py's
# normalised means measured four interleaved running sums at 5-6x and one running sum at
# 20-31x, growing with the length of the sum), a narrower format's is far more (the
# normalised values rounded to fp16 120x, to bf16 1000x)
NOISE_FACTOR = 64.0
# ... and its mean may be off the float64 result's by this many standard errors of its own
# spread beyond NOISE_FACTOR times the reference's mean error: rounding noise averages out over
# the elements (round to nearest has no bias), an offset or a scale does not (a constant where
# the exact result is 0, a few times one rounding's size, is inside the band above everywhere)
NOISE_BIAS_SE = 6.0


def _reference_errors(r: Any, b: Any) -> tuple:
    """The reference ``r``'s errors against float64 ``b`` (flat): the largest (absolute,
    and relative to each element's size), the norm of ``b``, the relative norm error, the
    typical (root mean square over the elements in error) of each, a strided sample of the
    absolute errors for the quantile with the sizes of the same elements, and how many
    elements are in error."""
    import torch
    m = m_rel = ref_err_sq = ref_rel_err_sq = truth_sq = 0.0
    erring = 0
    step = max(1, b.numel() // QUANTILE_SAMPLE)
    sample, sizes = [], []
    # errors relative to their element's size too (below TAIL_FLOOR of the output's typical
    # size, relative to that): a reference off by 0.1% of each output has its largest errors
    # where the outputs are largest (a few elements of a widened draw, exp of them 1e4 times
    # the rest), which is no tail; a tie or a threshold decided otherwise is one both ways
    size_floor = TAIL_FLOOR * _rms(b)
    for s in _chunks(b):
        y = b[s].to(torch.float64)
        e = (r[s].to(torch.float64) - y).abs()
        # every step-th element of the output, copied: a view would keep the chunk's errors
        sample.append(e[(-s.start) % step::step].clone())
        sizes.append(y[(-s.start) % step::step].abs())
        m = max(m, float(e.max()) if e.numel() else 0.0)
        rel = e / y.abs().clamp(min=size_floor or 1e-300)
        m_rel = max(m_rel, float(rel.max()) if rel.numel() else 0.0)
        ref_err_sq += float(e.square().sum())
        ref_rel_err_sq += float(rel.square().sum())
        erring += int((e > 0).sum())
        truth_sq += float(y.square().sum())
    norm = math.sqrt(truth_sq)
    ref_rel = math.sqrt(ref_err_sq) / norm if norm > 0 else math.inf
    typical = math.sqrt(ref_err_sq / erring) if erring else 0.0
    typical_rel = math.sqrt(ref_rel_err_sq / erring) if erring else 0.0
    return m, m_rel, norm, ref_rel, typical, typical_rel, sample, sizes, erring


def _quantile(errors: Any) -> float:
    """The reference's errors at ``PEAK_QUANTILE`` (over at most two strided samples' worth)."""
    import torch
    return float(torch.quantile(errors[:QUANTILE_SAMPLE * 2], PEAK_QUANTILE))


def _slack_by_size(sample: list, sizes: list):
    """Each element's allowance beyond the tolerance: ``PEAK_FACTOR`` times the reference's
    99.9th-percentile error among the sampled outputs no larger than about the element
    (binary exponent at most one above its own; at least the ``SIZE_SET`` smallest). A
    reference off by a share of each output (exp of a widened draw) earns allowances where its
    outputs are large that must not cover the small ones, which could otherwise be dropped;
    where its errors are alike at every size (a convolution's cancellations) every size gets
    about the one quantile. A function of a chunk's float64 outputs, and the largest
    allowance (for messages)."""
    import torch
    e = torch.cat(sample)[:QUANTILE_SAMPLE * 2]
    m = torch.cat(sizes)[:QUANTILE_SAMPLE * 2]
    step = max(1, e.numel() // SIZE_SAMPLE)
    e, m = e[::step], m[::step]
    ex = torch.frexp(m).exponent.to(torch.int64)
    lowest = int(ex[m > 0].min()) if bool((m > 0).any()) else 0
    ex = torch.where(m > 0, ex, torch.full_like(ex, lowest))
    ex, order = ex.sort()
    e = e[order]
    keys = torch.unique_consecutive(ex)
    # the outputs up to exponent k + 1, and never fewer than SIZE_SET: a handful of large
    # errors among few small outputs must not set their whole size's allowance
    ends = torch.searchsorted(ex, keys + 1, right=True).clamp(min=min(SIZE_SET, e.numel()))
    # on the sample's device, which is the float64 result's, where every y it is read for
    # lies (a CPU table indexed with a GPU index raised)
    table = torch.tensor([PEAK_FACTOR * _quantile(e[:int(n)]) for n in ends],
                         dtype=torch.float64, device=keys.device)
    keys = keys.to(torch.float64)

    def slack(y: Any) -> Any:
        k = torch.frexp(y.abs()).exponent.to(torch.float64)
        k = torch.where(y != 0, k, keys[0].expand_as(k))
        i = (torch.searchsorted(keys, k.contiguous(), right=True) - 1).clamp(0, len(keys) - 1)
        return table[i]
    return slack, float(table.max())


def _all_noise(m: float, norm: float, ref_rel: float, typical: float, erring: int,
               n: int) -> bool:
    """Whether the reference's output is rounding noise around its float64 result: its error
    far above that result (``NOISE_SHARE``), spread over most of the elements, with no tail.
    A discrete choice decided otherwise (a threshold on a value that is 0 exactly) errs on a
    few elements by a lot, and that size must not become every element's allowance."""
    return (math.isfinite(m) and m > 0 and (norm == 0 or ref_rel * NOISE_SHARE >= 1)
            and 2 * erring >= n and m <= MAX_TAIL * typical)


def within_reference_error(out: Any, ref: Any, truth: Any, atol: float, rtol: float) -> dict:
    """``compare`` for a reference that is itself less exact than its tolerance: an "fp32"
    convolution that PyTorch runs on TF32 tensor cores, a long fp32 sum or scan. ``truth`` is
    the same forward computed in float64. Another correct program (another algorithm, order or
    layout; a sum kept in double) differs from such a reference by more than the tolerance
    while agreeing with ``truth`` as well as the reference does. ``out`` passes when it is about
    as close to ``truth`` as the reference is: elementwise within the usual tolerance plus
    ``PEAK_FACTOR`` times the reference's 99.9th-percentile error, and in norm within ``NORM_FACTOR``
    times the reference's error (or rtol), over the whole output and again with each element's
    error taken relative to its size. Where the reference's errors have a tail (``MAX_TAIL``:
    a tie decided otherwise, a cancellation) no element gets more than the tolerance, but
    ``out`` may miss ``truth`` on up to ``TAIL_MISSES`` times as many elements as the reference
    does. Where the reference is not close to ``truth`` (``MAX_REFERENCE_ERROR``) this is
    ``compare`` against the reference, and so is any output that is not floating point;
    but where the reference is all rounding noise around ``truth`` (``_all_noise``), ``out``
    is judged by its distance from ``truth`` against the reference's (``_within_noise``)."""
    import torch
    if out.shape != ref.shape or out.dtype != ref.dtype or truth.shape != ref.shape \
            or not ref.is_floating_point() or not truth.is_floating_point() \
            or ref.numel() == 0:
        return compare(out, ref, atol, rtol)
    a, b = _flat(out, truth)
    r = _flat(ref, truth)[0]
    m, m_rel, norm, ref_rel, typical, typical_rel, sample, sizes, erring = \
        _reference_errors(r, b)
    if _all_noise(m, norm, ref_rel, typical, erring, b.numel()):
        return _within_noise(a, b, r, sample, rtol)
    tail = m > MAX_TAIL * typical and m_rel > MAX_TAIL * typical_rel
    plain: dict = {}
    if tail and math.isfinite(m) and ref_rel <= MAX_REFERENCE_ERROR:
        # its errors allow nothing per element, but it misses float64 on some elements: a
        # candidate may miss it on as many (counted, not sized), e.g. an exp of a scan whose
        # cancellations make a few errors huge, summed in another order
        plain = compare(out, ref, atol, rtol)
        if plain["ok"]:
            return plain
    if not (math.isfinite(m) and math.isfinite(ref_rel)) or ref_rel > MAX_REFERENCE_ERROR:
        return _unwidened(out, ref, atol, rtol, ref_rel)
    rms, given = _rms(b), atol
    atol = atol * min(1.0, rms) if rms > 0 else atol
    slack = 0.0 if tail else PEAK_FACTOR * _quantile(torch.cat(sample))
    by_size, most = (None, 0.0) if tail else _slack_by_size(sample, sizes)
    n_sized = 0   # elements beyond the allowance earned among outputs of their own size
    # each element's error relative to its own size (below the reference's typical error,
    # that error): a reference off by 0.1% of each output has large errors only where the
    # outputs are large, and the allowance it earns there must not cover the small ones
    floor = max(atol, typical)
    n_bad, ref_bad, max_abs, diff_sq, rel_sq, ref_rel_sq = 0, 0, 0.0, 0.0, 0.0, 0.0
    misses = _TailMisses(floor)
    for s in _chunks(a):
        bad, diff, _, y = _bad(a[s], b[s], atol, rtol, slack)
        n_bad += int(bad.sum())
        if tail:
            ref_out, ref_diff = _bad(r[s], b[s], atol, rtol, 0.0)[:2]
            ref_bad += int(ref_out.sum())
            misses.add(diff, ref_diff, y)
        if by_size is not None:
            n_sized += int((diff > atol + rtol * y.abs() + by_size(y)).sum())
        finite = torch.isfinite(diff)
        if not bool(finite.all()):
            max_abs = math.inf
        elif diff.numel():
            max_abs = max(max_abs, float(diff.max()))
        diff = torch.where(finite, diff, torch.zeros_like(diff))
        diff_sq += float(diff.square().sum())
        size = y.abs() + floor
        rel_sq += float((diff / size).square().sum())
        ref_rel_sq += float(((r[s].to(torch.float64) - y).abs() / size).square().sum())
    norm_rel = math.sqrt(diff_sq) / norm
    allowed = max(rtol, NORM_FACTOR * ref_rel)
    scaled, scaled_ref = (math.sqrt(rel_sq / a.numel()), math.sqrt(ref_rel_sq / a.numel()))
    scaled_allowed = max(rtol, NORM_FACTOR * scaled_ref)
    note = (f"the reference itself differs from its float64 computation by up to {m:.3g} "
            f"(relative norm {ref_rel:.2e})")
    reason, msg = "", ""
    if tail:
        note = (f"the reference itself misses its float64 computation on {ref_bad} of "
                f"{a.numel()} elements, by up to {m:.3g} (relative norm {ref_rel:.2e}); "
                f"so may a candidate, on up to {TAIL_MISSES:g}x as many")
        sized = misses.too_far()
        if n_bad > TAIL_MISSES * ref_bad or norm_rel > allowed or sized:
            # why the reference's own error earned so little: "9967 of 10000 out of
            # tolerance" alone would not tell a person that another order could have passed
            plain["msg"] += (
                f"; the reference itself is {ref_rel:.2e} (relative norm) from its float64 "
                f"computation, with a few errors far above its typical one (a tie or a "
                f"threshold decided otherwise, a cancellation), so its error allows nothing "
                f"per element: the candidate misses the float64 result on {n_bad} elements, "
                f"the reference on {ref_bad} (at most {TAIL_MISSES:g}x as many pass), "
                f"relative norm {norm_rel:.2e} (at most {allowed:.2e}), {misses.text()}")
            return plain
    elif n_bad:
        reason = "output_mismatch"
        msg = (f"{n_bad} of {a.numel()} elements further from the float64 result than the "
               f"tolerance ({_atol_text(atol, given, rms)}, rtol={rtol:g}) plus {slack:.3g} "
               f"({PEAK_FACTOR:g}x the reference's own error at its 99.9th percentile); {note}"
               + _where(out, ref, atol, rtol, slack, truth))
    elif n_sized > SIZED_SHARE * a.numel():
        # the reference's allowance where its outputs are large does not cover the small ones
        # wholesale: another order of a scan's cancellations misses it on a few small outputs
        # (0.02% in tests/adversarial's decayed_states), an output dropped where it is small
        # on every one of them
        reason = "output_mismatch"
        msg = (f"{n_sized} of {a.numel()} elements further from the float64 result than the "
               f"tolerance plus {PEAK_FACTOR:g}x the reference's own error at its 99.9th "
               f"percentile among outputs of about their size (at most {most:.3g}; at most "
               f"{SIZED_SHARE:.1%} of the elements may be); {note}"
               + _where(out, ref, atol, rtol, by_size, truth))
    elif norm_rel > allowed:
        reason = "output_mismatch"
        msg = (f"relative error {norm_rel:.2e} against the float64 result is above "
               f"{allowed:.2e} ({NORM_FACTOR:g}x the reference's own); {note}")
    elif scaled > scaled_allowed:
        reason = "output_mismatch"
        msg = (f"error relative to each element's size {scaled:.2e} (root mean square) against "
               f"the float64 result is above {scaled_allowed:.2e} ({NORM_FACTOR:g}x the "
               f"reference's own, {scaled_ref:.2e}): the reference's error where the outputs "
               f"are large allows nothing where they are small; {note}")
    return {"ok": not reason, "reason": reason, "abs": max_abs, "rel": norm_rel,
            "norm_rel": norm_rel, "mismatches": n_bad, "msg": msg, "widened": note}


class _TailMisses:
    """Where the reference's errors have a tail: the candidate's and the reference's largest
    error relative to each element's size plus ``floor`` (``TAIL_MISS_SIZE``), and how many are
    over ``TAIL_LARGE``, added up chunk by chunk."""

    def __init__(self, floor: float):
        self.floor = floor
        self.miss = self.ref_miss = 0.0
        self.large = self.ref_large = 0

    def add(self, diff: Any, ref_diff: Any, y: Any) -> None:
        import torch
        size = y.abs() + self.floor
        # an infinity or a NaN where the float64 result has a number misses by all of it
        big = torch.full_like(diff, math.inf)
        rel = torch.where(torch.isfinite(diff), diff / size, big)
        ref = torch.where(torch.isfinite(ref_diff), ref_diff / size, big)
        if rel.numel():
            self.miss = max(self.miss, float(rel.max()))
            self.ref_miss = max(self.ref_miss, float(ref.max()))
        self.large += int((rel > TAIL_LARGE).sum())
        self.ref_large += int((ref > TAIL_LARGE).sum())

    def allowed(self) -> tuple[float, int]:
        return (max(TAIL_MISS_SIZE, NORM_FACTOR * self.ref_miss),
                max(TAIL_LARGE_LEAST, int(TAIL_MISSES * self.ref_large)))

    def too_far(self) -> bool:
        """Whether the misses are too large, or too many of them large."""
        most, many = self.allowed()
        return not self.miss <= most or self.large > many

    def text(self) -> str:
        most, many = self.allowed()
        return (f"largest miss {self.miss:.3g} of its element's size plus {self.floor:.3g} "
                f"(at most {most:.3g}), {self.large} misses over {TAIL_LARGE:g} of that "
                f"(at most {many})")


def _unwidened(out: Any, ref: Any, atol: float, rtol: float, ref_rel: float) -> dict:
    """``compare`` against the reference, where its own error earns nothing (too far from its
    float64 computation, or not finite), saying why."""
    res = compare(out, ref, atol, rtol)
    if res["msg"] and math.isfinite(ref_rel):
        # why the reference's own error earned nothing: a person reading "9967 of 10000
        # out of tolerance" should learn that no other arithmetic could have agreed
        res["msg"] += (f"; the reference itself is {ref_rel:.2e} (relative norm) from its "
                       "float64 computation" + (
                           f", beyond {MAX_REFERENCE_ERROR:g}: there only the same "
                           "arithmetic in the same order agrees with it (a deep network "
                           "on TF32 convolutions, a random draw in the forward)"
                           if ref_rel > MAX_REFERENCE_ERROR else
                           ", with a few errors far above its typical one (a tie or a "
                           "threshold decided otherwise), so its error allows nothing"))
    return res


def _within_noise(a: Any, b: Any, r: Any, sample: list, rtol: float) -> dict:
    """``within_reference_error`` where the reference ``r`` is all rounding noise around its
    float64 result ``b`` (``NOISE_SHARE``): there no tolerance relative to the output's size
    means anything, and ``a`` is judged by its distance from ``b`` alone, against the
    reference's: each element within ``NOISE_FACTOR`` times the reference's 99.9th-percentile
    error (plus rtol of ``b``), the whole within ``NOISE_FACTOR`` times the
    reference's error in norm, and its mean error within what noise of its spread allows
    (``NOISE_BIAS_SE``). Zeros pass where the exact result is 0; a narrower format's noise
    does not, nor an offset. Its "rel" is the error in norm in units of the reference's (relative to
    the outputs' size, every output is noise)."""
    import torch
    slack = NOISE_FACTOR * _quantile(torch.cat(sample))
    n_bad, max_abs, diff_sq, ref_err_sq, bias, ref_bias = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    for s in _chunks(a):
        bad, diff, _, y = _bad(a[s], b[s], 0.0, rtol, slack)
        n_bad += int(bad.sum())
        worst = float(diff.max()) if diff.numel() else 0.0
        max_abs = max(max_abs, worst) if math.isfinite(worst) else math.inf
        diff_sq += float(diff.square().sum())
        bias += float((a[s].to(torch.float64) - y).sum())
        ref_err = r[s].to(torch.float64) - y
        ref_err_sq += float(ref_err.square().sum())
        ref_bias += float(ref_err.sum())
    n = max(1, a.numel())
    err, ref_err, norm = math.sqrt(diff_sq), math.sqrt(ref_err_sq), math.sqrt(float(sum(
        b[s].to(torch.float64).square().sum() for s in _chunks(b))))
    # the mean error, against what noise of this spread allows (err / n is its rms / sqrt(n))
    bias, ref_bias = abs(bias) / n, abs(ref_bias) / n
    bias_allowed = NOISE_FACTOR * ref_bias + NOISE_BIAS_SE * err / n
    note = (f"the reference's output is rounding noise (its float64 result {norm:.3g} in "
            f"norm, its own error {ref_err:.3g}): any other order of the arithmetic gives other "
            f"noise, so an output may be up to {NOISE_FACTOR:g}x as far from the float64 "
            "result as the reference is")
    reason, msg = "", ""
    if n_bad or not err <= NOISE_FACTOR * ref_err:
        reason = "output_mismatch"
        msg = (f"{n_bad} of {a.numel()} elements further from the float64 result than "
               f"{slack:.3g} ({NOISE_FACTOR:g}x the reference's own error at its 99.9th "
               f"percentile), and {err:.3g} from it in norm (at most {NOISE_FACTOR:g}x "
               f"the reference's {ref_err:.3g}); {note}")
    elif not bias <= bias_allowed:
        reason = "output_mismatch"
        msg = (f"the output is off the float64 result by {bias:.3g} on average (at most "
               f"{bias_allowed:.3g}: {NOISE_FACTOR:g}x the reference's mean error "
               f"{ref_bias:.3g}, plus {NOISE_BIAS_SE:g} standard errors of the output's own "
               f"spread): rounding noise averages out over the elements, an offset does not; "
               f"{note}")
    rel = err / ref_err if ref_err > 0 else math.inf
    return {"ok": not reason, "reason": reason, "abs": max_abs, "rel": rel, "norm_rel": rel,
            "mismatches": n_bad, "msg": msg, "widened": note, "noise": True}


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
