"""``stitchcuda-lab doctor``: checks the environment and says what to fix.

Each check returns a Check(name, ok, detail, fix). Required checks failing make the exit code 1;
optional ones (GPU, ncu, API key) only inform, since the CPU path and offline agents need none.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .settings import Settings, env_name


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _run(cmd: list[str], timeout: float = 20.0) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent package is missing
        return False


def check_torch() -> Check:
    try:
        import torch
    except ImportError:
        return Check("torch", False, "not installed", "pip install torch (>= 2.4)")
    return Check("torch", True, f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})")


def check_gpu() -> Check:
    try:
        import torch
        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            cap = torch.cuda.get_device_capability(0)
            return Check("gpu", True, f"{len(names)} x {names[0]} (sm_{cap[0]}{cap[1]})",
                         required=False)
    except Exception as e:  # a broken driver shows up here
        return Check("gpu", False, f"torch.cuda failed: {e}", "check the NVIDIA driver "
                     "(nvidia-smi) and that torch is a CUDA build", required=False)
    return Check("gpu", False, "no CUDA GPU visible: the CPU path (C + OpenMP) will be used",
                 "on a GPU machine install a CUDA build of torch", required=False)


def check_tensor_cores(settings: Settings) -> Check:
    """Can fp32 GEMMs use the 3xTF32 split (runtime.gemm)? Needs TF32 tensor cores (sm_80+)."""
    if not settings.tensor_cores:
        return Check("tensor cores", False, "off (tensor_cores setting): fp32 GEMMs stay in "
                     "fp32 cuBLAS", "STITCH_TENSOR_CORES=1 to allow the 3xTF32 split",
                     required=False)
    try:
        import torch
        if not torch.cuda.is_available():
            return Check("tensor cores", False, "no CUDA GPU: GEMMs use the CPU library",
                         required=False)
        cap = torch.cuda.get_device_capability(0)
    except Exception as e:  # noqa: BLE001  (reported by the gpu check too)
        return Check("tensor cores", False, f"torch.cuda failed: {e}", required=False)
    if cap[0] < 8:
        return Check("tensor cores", False, f"sm_{cap[0]}{cap[1]} has no TF32 tensor cores: "
                     "fp32 GEMMs stay in fp32 cuBLAS", required=False)
    return Check("tensor cores", True, f"sm_{cap[0]}{cap[1]}: large fp32 GEMMs may use the "
                 "fp32-accurate 3xTF32 split", required=False)


def check_driver() -> Check:
    if not shutil.which("nvidia-smi"):
        return Check("driver", False, "nvidia-smi not found", "install the NVIDIA driver "
                     "(only needed for GPU work)", required=False)
    rc, out = _run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"])
    return Check("driver", rc == 0, out.splitlines()[0] if out else f"exit {rc}",
                 "" if rc == 0 else "nvidia-smi failed: check the driver", required=False)


def check_nvrtc() -> Check:
    if not _has_module("cuda.core"):
        return Check("nvrtc", False, "cuda.core is not installed",
                     "pip install cuda-core cuda-bindings (needed for GPU kernels)", required=False)
    try:
        from cuda.core import Program, ProgramOptions
        Program('extern "C" __global__ void k(float* x){ x[0] = 1.f; }', code_type="c++",
                options=ProgramOptions(arch="sm_80")).compile("ptx")
        return Check("nvrtc", True, "compiled a test kernel to PTX", required=False)
    except Exception as e:
        return Check("nvrtc", False, f"NVRTC failed: {e}", "install nvidia-cuda-nvrtc matching "
                     "your CUDA version", required=False)


def check_cc() -> Check:
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        return Check("c compiler", False, f"{cc} not found", "install gcc (apt-get install gcc)")
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "t.c"
        src.write_text("#include <omp.h>\nint f(void){ int s=0;\n#pragma omp parallel for "
                       "reduction(+:s)\nfor(int i=0;i<8;i++) s+=i; return s; }\n")
        rc, out = _run([cc, "-O3", "-fopenmp", "-shared", "-fPIC", str(src), "-o",
                        str(Path(d) / "t.so")])
    if rc != 0:
        return Check("c compiler", False, f"{cc} -fopenmp failed: {out[-300:]}",
                     "install gcc with OpenMP (libgomp)")
    return Check("c compiler", True, f"{cc} builds OpenMP shared objects")


def check_ncu() -> Check:
    path = shutil.which("ncu")
    if not path:
        return Check("ncu", False, "Nsight Compute (ncu) not on PATH: verdicts will say no "
                     "hardware counters", "install Nsight Compute for per-kernel throughput",
                     required=False)
    return Check("ncu", True, path, required=False)


def check_folder(name: str, path: str) -> Check:
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".doctor-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
        return Check(name, True, str(p))
    except OSError as e:
        return Check(name, False, f"{p}: {e.strerror}", f"make {p} writable or set "
                     + env_name("cache_dir" if "cache" in name else "sessions_dir"))


def device_facts(device: str = "cpu", *, measure: bool = True) -> dict[str, Any]:
    """What an agent should know about the device: name, cores/SMs, memory, caches and, with
    ``measure``, the memory bandwidth (a large copy) and FLOP ceilings (a large GEMM) measured
    here, so kernel choices rest on this machine's numbers, not a datasheet's."""
    import torch
    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        p = torch.cuda.get_device_properties(index)
        facts: dict[str, Any] = {
            "device": device, "name": p.name, "capability": f"{p.major}{p.minor}",
            "sms": p.multi_processor_count, "memory_gb": p.total_memory / 2**30,
            "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", None),
            "shared_memory_per_block_kb": _kb(getattr(p, "shared_memory_per_block_optin", None)
                                              or getattr(p, "shared_memory_per_block", None)),
            "l2_mb": round(getattr(p, "L2_cache_size", 0) / 2**20, 1) or None}
    else:
        facts = {"device": "cpu", "name": _cpu_name(), "cores": _cpu_count(),
                 "memory_gb": _meminfo_gb(), "simd": _simd()}
    if measure:
        facts.update(_measure(device))
    return {k: v for k, v in facts.items() if v is not None}


WARM_S = 0.3   # seconds of the measured work run before it is timed


def _measure(device: str) -> dict[str, float]:
    """Copy bandwidth (GB/s) and GEMM throughput (TFLOP/s): the best of a few short runs."""
    import time

    import torch
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def best(fn, reps: int = 5, burst: int = 20 if cuda else 1) -> float:
        """Seconds a call, the best of ``reps`` bursts of ``burst`` calls, after a warm-up
        of at least WARM_S: one 256 MB copy takes 0.15 ms on an H200, near what a launch
        and a synchronise cost, and a GPU that was idle runs its first milliseconds at low
        clocks (the copy read 2850 GB/s where a warm one reads 3850, and memory-bound
        kernels showed 134% of it)."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < WARM_S:
            fn()
            sync()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(burst):
                fn()
            sync()
            times.append((time.perf_counter() - t0) / burst)
        return min(times)

    out: dict[str, float] = {}
    n = (256 if cuda else 32) * 2**20 // 4          # float32 elements
    buffers = [torch.empty(n, device=device).uniform_(), torch.empty(n, device=device)]
    out["bandwidth_gbs"] = 2 * n * 4 / best(lambda: buffers[1].copy_(buffers[0])) / 1e9
    buffers.clear()                                  # give the memory back before the GEMM
    size = 4096 if cuda else 768
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    flops = 2 * size ** 3
    if cuda:
        switch = torch.backends.cuda.matmul
        saved = switch.allow_tf32
        try:
            switch.allow_tf32 = False
            out["fp32_tflops"] = flops / best(lambda: a @ b) / 1e12
            if torch.cuda.get_device_capability(device)[0] >= 8:
                switch.allow_tf32 = True
                out["tf32_tflops"] = flops / best(lambda: a @ b) / 1e12
        finally:
            switch.allow_tf32 = saved    # this process's precision is left as it was
        ah, bh = a.half(), b.half()
        out["fp16_tflops"] = flops / best(lambda: ah @ bh) / 1e12
    else:
        out["fp32_tflops"] = flops / best(lambda: a @ b) / 1e12
    return {k: round(v, 3) for k, v in out.items()}


def _kb(n: int | None) -> int | None:
    return n // 1024 if n else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine() or "unknown CPU"


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:     # not on Linux
        return os.cpu_count() or 1


def _meminfo_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return None


def _simd() -> str | None:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return None
    have = [f for f in ("avx512f", "avx2", "fma", "neon", "asimd") if f in flags]
    return "SIMD: " + ", ".join(have) if have else None


def check_device(settings: Settings) -> Check:
    """The figures the LLM agents are shown (``device_facts``), measured on this machine."""
    try:
        import torch
        device = "cuda" if settings.device != "cpu" and torch.cuda.is_available() else "cpu"
        f = device_facts(device)
    except Exception as e:  # noqa: BLE001  (informative only)
        return Check("device facts", False, f"could not measure: {e}", required=False)
    parts = [f.get("name", device)]
    if f.get("sms"):
        parts.append(f"{f['sms']} SMs")
    if f.get("cores"):
        parts.append(f"{f['cores']} cores")
    parts.append(f"{f.get('bandwidth_gbs', 0):.0f} GB/s copy")
    parts += [f"{f[k]:.1f} TFLOP/s {k.split('_')[0]}" for k in
              ("fp32_tflops", "tf32_tflops", "fp16_tflops") if f.get(k)]
    return Check("device facts", True, ", ".join(parts), required=False)


def check_api_key(env: dict[str, str] | None = None) -> Check:
    env = dict(os.environ) if env is None else env
    present = bool(env.get("ANTHROPIC_API_KEY"))
    # Only presence is ever reported, never any part of the value.
    return Check("anthropic key", present, "ANTHROPIC_API_KEY is set" if present else
                 "ANTHROPIC_API_KEY is not set: the claude agent is unavailable (offline "
                 "agents work)", "" if present else "export ANTHROPIC_API_KEY=... to use Claude",
                 required=False)


def check_package(module: str, extra: str) -> Check:
    ok = _has_module(module)
    return Check(module, ok, "installed" if ok else "not installed",
                 "" if ok else f"pip install 'stitchcuda-lab[{extra}]'", required=False)


def run_checks(settings: Settings) -> list[Check]:
    return [check_torch(), check_gpu(), check_tensor_cores(settings), check_driver(),
            check_nvrtc(), check_cc(), check_ncu(),
            check_folder("cache folder", settings.cache_dir),
            check_folder("sessions folder", settings.sessions_dir),
            check_device(settings), check_api_key(), check_package("ipywidgets", "notebook"),
            check_package("plotly", "notebook"), check_package("anthropic", "llm")]


def main_doctor(args) -> int:
    settings = Settings.from_env()
    checks = run_checks(settings)
    if getattr(args, "json", False):
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        for c in checks:
            mark = "ok " if c.ok else ("!! " if c.required else "-- ")
            print(f"{mark} {c.name:<16} {c.detail}")
            if not c.ok and c.fix:
                print(f"    fix: {c.fix}")
    bad = [c for c in checks if c.required and not c.ok]
    if bad and not getattr(args, "json", False):
        print(f"\n{len(bad)} required check(s) failed.", file=sys.stderr)
    return 1 if bad else 0
