"""Run-time anti-hacking checks: which aten ops a candidate ran, and whether that is allowed.

Op policy (the Verifier applies it to every candidate):

- CHEAP ops never count as computation: allocation and fills (empty*, zeros*, full*, fill_,
  zero_), views and reshapes (view, reshape, as_strided, expand, permute, transpose, slice, ...)
  and copies (clone, copy_, _to_copy, contiguous, cat, stack). A copy moves data but computes
  nothing; a candidate that computes with lower precision is caught by the tolerance instead.
- LIBRARY ops are vendor-library calls a plan may keep (mm, addmm, bmm, convolution, scaled
  dot-product attention, ...). They are allowed when listed in ``kept``.
- Every other op is COMPUTE. It is a "pytorch_fallback" when
    * it is in ``replaced`` (the candidate claims to compute it itself), or
    * the candidate claims to replace everything (``replaced`` contains "*", or covers every
      compute op of the reference) and the op is not in ``kept``, or
    * ``replaced`` is None (a candidate file, which declares nothing): then every compute op
      that is not a library op and not in the file's module-level ``KEPT_OPS`` is a fallback.

Names compare by op packet with the in-place underscore dropped: "aten.add.Tensor", "aten::add",
"add" and "add_" all mean "add". The names and the CHEAP and LIBRARY tables are
``stitchcuda_lab.aten``'s, which the Coder's claims follow too.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any
from collections.abc import Iterable

from ..aten import CHEAP, LIBRARY, library_family, norm, op_class

REASONS = {
    # rejected
    "pytorch_fallback": "the candidate ran PyTorch ops it claims to replace",
    "input_mutation": "the candidate changed its inputs",
    "output_aliasing": "an output shares memory with an input or an earlier output",
    "cached_output": "the candidate returned results cached from an earlier call",
    "constant_output": "the output does not depend on the inputs",
    "side_stream": "work on another CUDA stream was not joined before returning",
    "background_thread": "the candidate left work running in a background thread",
    "patched_timer": "the candidate replaced a timer or synchronize function",
    "patched_verifier": "the candidate replaced a function the Verifier's checks rely on",
    "numerics_flags": "the candidate changed a global precision switch (TF32, reduced-precision "
                      "reductions), which would lower the reference's precision too",
    "tensor_subclass": "an output is a torch.Tensor subclass (work deferred until it is read)",
    "hardcoded_output": "right on the recorded seeds only: wrong on unannounced inputs",
    "protocol_tampering": "something other than the worker wrote a reply on its pipe",
    # incorrect
    "output_mismatch": "outputs differ from the reference beyond tolerance",
    "input_range": "outputs are right on get_inputs()'s draws but wrong on inputs of the same "
                   "shapes and dtypes outside their range (the draw scaled by -2, 2 or -1)",
    "uninitialized_output": "outputs hold NaN where the reference has numbers (unwritten memory)",
    "shape_mismatch": "output shapes differ from the reference",
    "dtype_mismatch": "output dtypes differ from the reference",
    "output_count": "the number of outputs differs from the reference",
    "nondeterministic": "a second call on the same inputs gave a different result",
    # runtime_error / build_error / timeout
    "exception": "the candidate raised an exception",
    "crash": "the worker process died (segfault, abort)",
    "cuda_error": "a CUDA error (illegal memory access, launch failure)",
    "out_of_memory": "the candidate (or the judge beside it) ran out of memory",
    "compile_error": "a kernel did not compile",
    "syntax_error": "the candidate program is not valid Python",
    "timeout": "the job ran past its time limit",
}

def find_fallback(candidate_ops: Iterable[str], *, replaced: Iterable[str] | None,
                  kept: Iterable[str], reference_ops: Iterable[str] = ()) -> list[str]:
    """The candidate's ops that break the policy above (aten names as traced), sorted."""
    kept_n = {norm(k) for k in kept}
    families = {library_family(k) for k in kept_n} - {None}
    if replaced is None:
        strict, rep, allowed = True, set(), kept_n | LIBRARY
    else:
        rep = {norm(r) for r in replaced}
        strict, allowed = _claims_everything(rep, reference_ops), kept_n
    bad = []
    for op in candidate_ops:
        n = norm(op)
        if n in CHEAP or n in allowed or library_family(n) in families:
            continue
        if n in rep or (strict and n != "*"):
            bad.append(str(op))
    return sorted(set(bad))


def foreign_work_allowed(*, replaced: Iterable[str] | None, kept: Iterable[str],
                         reference_ops: Iterable[str] = ()) -> tuple[bool, bool]:
    """What the policy above lets a candidate's forward spend time in, for a judge that sees
    code rather than ops (the CPU sampler): (PyTorch's own CPU kernels, GEMM / convolution /
    attention libraries). A plan that replaces only some of the reference's ops may run the
    rest in PyTorch; one that replaces everything (or a candidate file) may run only the ops
    it keeps, and a file may run library code where the reference runs a library op."""
    kept_n = {norm(k) for k in kept}
    kept_compute = any(op_class(k) == "compute" for k in kept_n)
    kept_library = any(op_class(k) == "library" for k in kept_n)
    if replaced is None:   # a file: library work only where the reference itself does some
        return kept_compute, any(op_class(o) == "library" for o in reference_ops)
    if _claims_everything({norm(r) for r in replaced}, reference_ops):
        return kept_compute, kept_library
    return True, True


def _claims_everything(replaced: set[str], reference_ops: Iterable[str]) -> bool:
    """A plan's ``replaced`` (normalised) says "*" or covers every compute op of the
    reference: then only what it keeps may run besides its own code."""
    ref_compute = {norm(o) for o in reference_ops if op_class(o) == "compute"}
    return "*" in replaced or (bool(ref_compute) and ref_compute <= replaced)


def make_tracer():
    """A TorchDispatchMode that counts every aten op dispatched while it is active."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpTracer(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: Counter[str] = Counter()
            self._lock = threading.Lock()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if getattr(func, "namespace", "") != "profiler":   # the profiler's own markers
                with self._lock:
                    self.counts[str(func)] += 1
            return func(*args, **(kwargs or {}))

    return OpTracer()


# --- memory identity -------------------------------------------------------------------------

def storage_span(t: Any) -> tuple[int, int, str] | None:
    """(start, end, device) of the bytes a tensor's storage covers; None for empty storage."""
    try:
        st = t.untyped_storage()
        start, n = st.data_ptr(), st.nbytes()
    except Exception:  # noqa: BLE001  (sparse / meta tensors)
        return None
    if n == 0 or start == 0:
        return None
    return (start, start + n, str(t.device))


def any_overlap(xs: Iterable[Any], ys: Iterable[Any]) -> bool:
    """Whether a tensor of ``xs`` shares memory with one of ``ys`` (each span taken once)."""
    return spans_meet([storage_span(x) for x in xs], [storage_span(y) for y in ys])


def spans_meet(xs: list, ys: list) -> bool:
    """Whether a span of ``xs`` shares a byte with one of ``ys`` (``storage_span``s, None
    for none)."""
    return any(spans_overlap(x, y) for x in xs for y in ys)


def spans_overlap(sa: tuple[int, int, str] | None, sb: tuple[int, int, str] | None) -> bool:
    """Whether two ``storage_span``s share a byte on one device."""
    if sa is None or sb is None or sa[2] != sb[2]:
        return False
    return sa[0] < sb[1] and sb[0] < sa[1]


class Held:
    """Every output a candidate returned so far, for the check that a new output does not
    reuse an earlier one's memory. The newest are kept alive up to ``budget`` bytes, so the
    allocator cannot hand their memory out again and an overlap is the candidate's doing;
    older ones are held by a weak reference to their storage only, and count while that
    storage lives (the candidate kept it, or a view of it). Holding all of them would hold a
    job's every output: twelve 6 GB outputs of a softmax over 1.6 billion elements ran the
    candidate's GPU out of memory. What the weak hold misses: memory the candidate owns outside
    torch (a raw allocation wrapped afresh on every call) once its first wrapper is demoted."""

    def __init__(self, budget: int):
        self.budget = budget
        self.strong: list[tuple[Any, int]] = []      # (tensor, bytes), oldest first
        self.weak: list[tuple[Any, tuple[int, int, str]]] = []
        self.bytes = 0

    def add(self, ts: Iterable[Any]) -> None:
        import weakref
        for t in ts:
            span = storage_span(t)
            if span is None:
                continue
            self.strong.append((t, span[1] - span[0]))
            self.bytes += span[1] - span[0]
        while self.strong and self.bytes > self.budget:
            t, n = self.strong.pop(0)
            self.bytes -= n
            span = storage_span(t)
            if span is not None:
                self.weak.append((weakref.ref(t.untyped_storage()), span))

    def overlaps(self, *ts: Any) -> bool:
        """Whether any of ``ts`` shares memory with an output still held. Each span is taken
        once per question (a held tensor's storage is read afresh: code that kept it can swap
        or resize it): asked per output, a call's 7 small outputs against a job's 126 held
        ones took 3-7 ms of the candidate's path that the reference's calibration never paid,
        and an honest 0.5 ms candidate was judged a patched timer."""
        self.weak = [(r, sp) for r, sp in self.weak if r() is not None]
        return spans_meet([storage_span(t) for t in ts],
                          [storage_span(h) for h, _ in self.strong] + [sp for _, sp in self.weak])


# --- threads ---------------------------------------------------------------------------------

def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


def new_threads(before: set[int]) -> list[str]:
    """Names of Python threads started since ``before`` that are still running."""
    return sorted(t.name for t in threading.enumerate()
                  if t.is_alive() and t.ident not in before)


# --- work run after the timer by the interpreter --------------------------------------------

def signal_handlers() -> dict:
    """Each signal's Python handler now (before any candidate code: ``work_after_timer``)."""
    import signal
    out = {}
    for sig in signal.valid_signals():
        try:
            out[sig] = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
    return out


def work_after_timer(handlers: dict) -> str:
    """Why code of the candidate's may run between its timer and the reply, else "": a Python
    signal handler it installed (an interval timer's SIGALRM runs it between any two of the
    harness's bytecodes, after the end reading), or an interval timer left armed."""
    import signal
    changed = []
    for sig, was in handlers.items():
        try:
            now = signal.getsignal(sig)
            if now != was and callable(now):   # SIG_IGN, SIG_DFL run no code of its own
                changed.append(signal.Signals(sig).name)
        except (ValueError, OSError):
            continue
    if changed:
        return ("a signal handler was installed (" + ", ".join(changed[:4]) + "): it runs "
                "wherever the harness is when the signal comes, after the candidate's timer")
    armed = [name for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
             if any(signal.getitimer(getattr(signal, name)))]
    if armed:
        return ("an interval timer was left armed (" + ", ".join(armed) + "): its signal "
                "comes after the candidate's timer")
    return ""


def refuse_audit_hooks() -> None:
    """The sandbox's own audit hook, installed before any candidate code: it refuses every
    audit hook added after it (one cannot be taken away, and runs at the harness's file
    opens, after the candidate's timer)."""
    import sys

    def hook(event: str, args: tuple) -> None:
        if event == "sys.addaudithook":
            raise RuntimeError("the sandbox takes no audit hooks")
    sys.addaudithook(hook)


# --- global numerics switches ------------------------------------------------------------------

def _switches():
    """(name, read, write) for each process-wide precision switch, in restore order: torch's
    legacy setters first (they also set the new API's values), then the new API's own values,
    which leaves both readable and equal to what was saved."""
    import torch
    b = torch.backends

    def attr(obj, name):
        return (lambda: getattr(obj, name)), (lambda v: setattr(obj, name, v))

    mm = b.cuda.matmul
    table = [("torch.get_float32_matmul_precision()",
              (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision))]
    for prefix, obj, name in [
            ("torch.backends.cuda.matmul.", mm, "allow_tf32"),
            ("torch.backends.cuda.matmul.", mm, "allow_fp16_reduced_precision_reduction"),
            ("torch.backends.cuda.matmul.", mm, "allow_bf16_reduced_precision_reduction"),
            ("torch.backends.cudnn.", b.cudnn, "allow_tf32"),
            ("torch.backends.", b, "fp32_precision"),
            ("torch.backends.cuda.matmul.", mm, "fp32_precision"),
            ("torch.backends.cudnn.conv.", getattr(b.cudnn, "conv", None), "fp32_precision"),
            ("torch.backends.cudnn.rnn.", getattr(b.cudnn, "rnn", None), "fp32_precision")]:
        table.append((prefix + name, attr(obj, name)))
    return [(name, read, write) for name, (read, write) in table]


def numerics_flags() -> dict[str, Any]:
    """The process-wide switches that change fp32 matmul/conv precision, by name.

    A candidate runs in the reference's process, so flipping one (say allow_tf32) would make
    the reference compute in TF32 too and hide the precision loss from the comparison. A
    switch torch cannot read back (set through both its legacy and new APIs) reads "unreadable".
    """
    out: dict[str, Any] = {}
    for name, read, _ in _switches():
        try:
            out[name] = read()
        except Exception:  # noqa: BLE001  (torch raises when both APIs were mixed)
            out[name] = "unreadable"
    return out


def changed_numerics(before: dict[str, Any]) -> list[str]:
    """``name: old -> new`` for every switch that differs from ``before``."""
    now = numerics_flags()
    return [f"{k}: {before[k]!r} -> {now.get(k)!r}" for k in before if now.get(k) != before[k]]


def restore_numerics(saved: dict[str, Any]) -> None:
    """Put the switches back as ``numerics_flags()`` read them."""
    for name, _, write in _switches():
        v = saved.get(name)
        if v is None or v == "unreadable":
            continue
        try:
            write(v)
        except Exception:  # noqa: BLE001  (a switch this torch does not have)
            pass
