"""How far a measured time is from the device's limit: the least work a forward must do
(bytes moved, FLOPs) against the bandwidth and FLOP rate measured on this machine.

The work is counted on the ``meta`` device (shapes only, nothing allocated), so a problem of
tens of GB costs nothing to measure: bytes are the inputs, parameters, buffers and outputs,
each read or written once (the least any program moves); FLOPs are what
``torch.utils.flop_counter`` counts (GEMMs, convolutions, attention).
"""

from __future__ import annotations

from typing import Any


def least_work(problem: Any) -> dict[str, Any]:
    """``{"bytes": int, "flops": int}`` of one forward of ``problem``; fields that cannot be
    counted (an op without a meta kernel, say) are left out, with ``work_error`` saying why."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    out: dict[str, Any] = {}
    try:
        ns = problem.namespace()
        with torch.device("meta"):
            model = ns["Model"](*ns.get("get_init_inputs", list)())
            inputs = list(ns["get_inputs"]())
    except Exception as e:  # noqa: BLE001 - advice only: the bench row goes on without it
        return {"work_error": f"building on meta: {type(e).__name__}: {e}"[:200]}
    state = list(model.parameters()) + list(model.buffers())
    fixed = _nbytes(inputs) + _nbytes(state)
    try:
        live = _live_bytes_mode()
        with torch.no_grad(), FlopCounterMode(display=False) as counter, live:
            result = model(*inputs)
        out["bytes"] = fixed + _nbytes(_tensors(result))
        out["flops"] = int(counter.get_total_flops())
        out["peak_bytes"] = live.peak
    except Exception as e:  # noqa: BLE001
        out["bytes"] = fixed
        out["work_error"] = f"forward on meta: {type(e).__name__}: {e}"[:200]
    return out


def shares(work: dict[str, Any], ms: float | None, device: dict[str, Any]) -> dict[str, Any]:
    """Achieved GB/s and TFLOP/s at ``ms`` per forward, and each as a share of the device's
    measured copy bandwidth and fp32-input GEMM rate on the tensor cores (TF32; the plain
    fp32 rate where there are none), from ``doctor.device_facts``."""
    out: dict[str, Any] = {}
    if not ms or ms <= 0:
        return out
    seconds = ms / 1e3
    if work.get("bytes"):
        out["gbs"] = round(work["bytes"] / seconds / 1e9, 1)
        if device.get("bandwidth_gbs"):
            out["bandwidth_share"] = round(out["gbs"] / device["bandwidth_gbs"], 3)
    if work.get("flops"):
        out["tflops"] = round(work["flops"] / seconds / 1e12, 2)
        # fp32 inputs on the tensor cores (TF32) are the fastest an fp32 GEMM or convolution
        # can go (cuDNN's convolutions use them by default), so that is the roof
        peak = device.get("tf32_tflops") or device.get("fp32_tflops")
        if peak:
            out["flop_share"] = round(out["tflops"] / peak, 3)
    # The nearer limit is the one that binds: the larger share says how close the run is.
    bound = max(("bandwidth_share", "flop_share"), key=lambda k: out.get(k) or 0.0)
    if out.get(bound):
        out["bound"] = "memory" if bound == "bandwidth_share" else "compute"
        out["ceiling_share"] = out[bound]
    return out


def _live_bytes_mode() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class LiveBytes(TorchDispatchMode):
        """The most bytes of tensors made during a forward that are alive at once (what a
        caching allocator must hold beyond the inputs and weights): each new tensor an op
        returns is counted until Python lets go of it; views and in-place results are not."""

        def __init__(self) -> None:
            super().__init__()
            self.live = self.peak = 0

        def _free(self, n: int) -> None:
            self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            import weakref
            result = func(*args, **(kwargs or {}))
            if any(r.alias_info is not None for r in func._schema.returns):
                return result
            for t in _tensors(result):
                n = t.numel() * t.element_size()
                self.live += n
                weakref.finalize(t, self._free, n)
            self.peak = max(self.peak, self.live)
            return result

    return LiveBytes()


def _tensors(x: Any) -> list:
    import torch
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _tensors(item)]
    return []


def _nbytes(xs: list) -> int:
    import torch
    return sum(t.numel() * t.element_size() for t in _tensors(xs) if isinstance(t, torch.Tensor))
