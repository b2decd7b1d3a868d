"""runtime: what generated programs import. C kernels run here; CUDA ones on the GPU machine."""

from __future__ import annotations

import pytest
import torch

from stitchcuda_lab import runtime
from stitchcuda_lab.errors import BuildError, UsageError
from stitchcuda_lab.runtime import build

ARGS_C = r"""
#include <stdint.h>
void args(float* out, int64_t a, float b, int32_t c, double d, int32_t flag) {
    out[0] = (float)a; out[1] = b; out[2] = (float)c; out[3] = (float)d; out[4] = (float)flag;
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "kc"))
    runtime.clear_loaded()
    yield
    runtime.clear_loaded()


def test_c_kernel_runs_on_tensors_with_openmp():
    src = r"""
#include <stdint.h>
void axpy(const float* x, float* y, float a, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
"""
    mod = runtime.load(src, lang="c", name="axpy")
    x, y = torch.randn(10_000), torch.randn(10_000)
    expect = y + 2.5 * x
    mod.call("axpy", x, y, 2.5, x.numel())
    torch.testing.assert_close(y, expect)


def test_argument_widths_follow_the_contract():
    mod = runtime.load(ARGS_C, lang="c", name="args")
    out = torch.zeros(5)
    mod.call("args", out, 2**33 + 1024, 1.5, runtime.i32(-7), runtime.f64(0.25), True)
    assert out.tolist() == [float(2**33 + 1024), 1.5, -7.0, 0.25, 1.0]


def test_compile_error_is_a_build_error_with_the_kernels_own_line_numbers():
    src = "#include <stdint.h>\n\nvoid f(float* x) {\n    x[0] = undefined_name;\n}\n"
    with pytest.raises(BuildError) as e:
        runtime.load(src, lang="c", name="broken")
    assert "broken.c:4:" in e.value.log
    assert "undefined_name" in e.value.log
    assert "/tmp" not in e.value.log and "Traceback" not in e.value.log


def test_unknown_function_and_language_are_usage_errors():
    mod = runtime.load(ARGS_C, lang="c", name="args")
    with pytest.raises(UsageError, match="no function 'nope'"):
        mod.call("nope")
    with pytest.raises(UsageError, match="unknown kernel language"):
        runtime.load(ARGS_C, lang="fortran")
    with pytest.raises(UsageError, match="unsupported type"):
        mod.call("args", "a string")


def test_same_source_loads_once_per_process():
    a = runtime.load(ARGS_C, lang="c", name="args")
    b = runtime.load(ARGS_C, lang="c", name="args")
    assert a is b


def test_sm_count_is_positive():
    assert runtime.sm_count() >= 1


def test_cuda_without_a_gpu_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(UsageError, match="needs a CUDA GPU"):
        runtime.load('extern "C" __global__ void k() {}', lang="cuda", name="k")


NVRTC_SRC = '''extern "C" __global__ void scale(float* x, long long n, float a) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] = helper(x[i], a);
}
'''


def _nvrtc_or_skip():
    try:
        build._cuda_core()
        build.nvrtc_version()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC not usable here: {e}")


def test_nvrtc_compiles_device_code_without_a_gpu():
    _nvrtc_or_skip()
    src = "float helper(float v, float a) { return v * a; }\n" + NVRTC_SRC
    cubin = build.compile_cuda(src, name="scale", arch="90")
    assert cubin[:4] == b"\x7fELF"


def test_nvrtc_error_names_the_kernels_line():
    _nvrtc_or_skip()
    with pytest.raises(BuildError) as e:
        build.compile_cuda(NVRTC_SRC, name="scale", arch="90")  # helper is undefined
    assert 'scale.cu(3): error: identifier "helper" is undefined' in e.value.log


@pytest.mark.gpu
def test_cuda_kernel_launches_on_the_current_stream():
    src = "float helper(float v, float a) { return v * a; }\n" + NVRTC_SRC
    mod = runtime.load(src, lang="cuda", name="scale")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        mod.launch("scale", grid=((1000 + 255) // 256, 1, 1), block=(256, 1, 1),
                   args=(x, x.numel(), 2.0))
        y = x * 1  # ordered after the kernel only if it ran on stream s
    s.synchronize()
    torch.testing.assert_close(y, torch.arange(1000, dtype=torch.float32, device="cuda") * 2)


@pytest.mark.gpu
def test_cuda_argument_widths_follow_the_contract():
    src = r'''extern "C" __global__ void args(float* out, long long a, float b, int c, double d,
                                            int flag) {
    out[0] = (float)a; out[1] = b; out[2] = (float)c; out[3] = (float)d; out[4] = (float)flag;
}'''
    mod = runtime.load(src, lang="cuda", name="args")
    out = torch.zeros(5, device="cuda")
    mod.launch("args", grid=1, block=1, args=(out, 2**33 + 1024, 1.5, runtime.i32(-7),
                                               runtime.f64(0.25), True))
    assert out.tolist() == [float(2**33 + 1024), 1.5, -7.0, 0.25, 1.0]


@pytest.mark.gpu
def test_cuda_dynamic_shared_memory_above_48k():
    src = r'''extern "C" __global__ void sm(float* out) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = threadIdx.x; __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}'''
    mod = runtime.load(src, lang="cuda", name="sm")
    out = torch.zeros(256, device="cuda")
    mod.launch("sm", grid=1, block=256, args=(out,), shared_mem=64 * 1024)
    torch.cuda.synchronize()
    assert out[0].item() == 255.0


@pytest.mark.gpu
def test_cuda_cache_hit_does_not_call_nvrtc():
    src = "float helper(float v, float a) { return v * a; }\n" + NVRTC_SRC
    n0 = build.COMPILES["cuda"]
    runtime.load(src, lang="cuda", name="scale")
    runtime.clear_loaded()
    runtime.load(src, lang="cuda", name="scale")
    assert build.COMPILES["cuda"] == n0 + 1


def test_kernel_calls_are_named_in_profiler_timelines(tmp_path, monkeypatch):
    import torch

    from stitchcuda_lab import runtime
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path))
    mod = runtime.load("void add_one(float* x, long long n)"
                       "{ for (long long i = 0; i < n; i++) x[i] += 1.0f; }",
                       lang="c", name="add_one")
    x = torch.zeros(16)
    with torch.profiler.profile() as prof:
        mod.call("add_one", x, 16)
    assert "stitch::add_one" in [e.name for e in prof.events()]
    assert float(x.sum()) == 16.0


class _FakeCudaCore:
    """Stands in for cuda.core where no GPU is: records configs and launches."""

    def __init__(self):
        self.configs, self.launches = [], []

    def LaunchConfig(self, **kw):  # noqa: N802  (cuda.core's name)
        self.configs.append(kw)
        return kw

    def launch(self, stream, config, kernel, *args):
        self.launches.append((config["shmem_size"], args))


def test_launch_makes_each_config_once_and_only_raises_the_shared_memory_opt_in(monkeypatch):
    from stitchcuda_lab import runtime
    mod = object.__new__(runtime.CudaModule)
    mod.name, mod.device, mod._cc = "k", 0, _FakeCudaCore()
    mod._kernels, mod._launches, mod._smem = {"f": "kernel-f"}, {}, {}
    opted = []
    monkeypatch.setattr(runtime.kernels, "_allow_large_shared", lambda k, n, d: opted.append(n))
    monkeypatch.setattr(runtime.kernels, "_current_stream", lambda d: "stream")
    for smem in (100_000, 64_000, 100_000, 64_000, 1024):
        mod.launch("f", grid=(4, 1, 1), block=(256, 1, 1), args=(7,), shared_mem=smem)
    mod.launch("f", grid=[4, 1, 1], block=[256, 1, 1], args=(7,), shared_mem=1024)  # lists
    assert opted == [100_000]        # 64 KB after 100 KB must not lower the kernel's limit
    assert len(mod._cc.configs) == 3 and len(mod._cc.launches) == 6
    assert [s for s, _ in mod._cc.launches] == [100_000, 64_000, 100_000, 64_000, 1024, 1024]


def test_libm_calls_in_simd_loops_run_vectorised_and_accurate():
    """expf, tanhf, erff, log1pf in a `#pragma omp simd` loop call glibc's SIMD versions
    (libmvec) where this C library has them, and agree with torch to float32 precision."""
    from stitchcuda_lab.runtime import build
    src = r"""
#include <math.h>
#include <stdint.h>
void act(const float* restrict x, float* restrict y, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i)
        y[i] = tanhf(x[i]) * expf(-x[i] * x[i]) + erff(x[i]) - log1pf(fabsf(x[i]));
}
"""
    import os
    import platform
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    version = tuple(int(v) for v in libc.split()[1].split(".")[:2]) if libc else (0, 0)
    if version < (2, 35) or platform.machine() != "x86_64":
        pytest.skip(f"SIMD tanhf needs glibc 2.35 on x86-64 ({libc or 'no glibc'} here)")
    assert {"expf", "tanhf", "erff", "log1pf"} <= set(build.vector_math(build.c_compiler()))
    so = build.compile_c(src, name="act")
    assert b"_ZGV" in so and b"tanhf" in so      # calls a vector variant (x86: _ZGVdN8v_tanhf)
    mod = runtime.load(src, lang="c", name="act")
    x = torch.randn(100_000) * 3
    y = torch.empty_like(x)
    mod.call("act", x, y, x.numel())
    want = torch.tanh(x) * torch.exp(-x * x) + torch.erf(x) - torch.log1p(x.abs())
    torch.testing.assert_close(y, want, atol=2e-6, rtol=2e-6)


def _guarded(scale: str, name: str) -> str:
    """A kernel as the offline coder writes one: a guarded block of helpers, then itself."""
    return (f"#ifndef SC_C_PRELUDE\n#define SC_C_PRELUDE\n#include <stdint.h>\n"
            f"static inline float sc_scale(float v) {{ return v * {scale}; }}\n#endif\n"
            f"void {name}(const float* x, float* y, int64_t n) {{\n"
            f"    for (int64_t i = 0; i < n; ++i) y[i] = sc_scale(x[i]);\n}}\n")


def test_a_group_of_kernels_is_one_build_with_their_shared_helpers_once():
    sources = {f"k{i}": _guarded("2.0f", f"k{i}") for i in range(3)}
    mods = runtime.load_group(sources, list(sources), lang="c")
    assert len({id(m) for m in mods.values()}) == 1     # one module: one build
    x = torch.arange(4.0)
    for name, mod in mods.items():
        y = torch.empty(4)
        mod.call(name, x, y, 4)
        assert y.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_kernel_whose_helpers_were_edited_is_built_alone_and_runs_its_edit():
    sources = {"k0": _guarded("2.0f", "k0"), "k1": _guarded("3.0f", "k1"),
               "k2": _guarded("2.0f", "k2")}
    mods = runtime.load_group(sources, list(sources), lang="c")
    assert mods["k0"] is mods["k2"] and mods["k1"] is not mods["k0"]
    x, y = torch.ones(2), torch.empty(2)
    mods["k1"].call("k1", x, y, 2)
    assert y.tolist() == [3.0, 3.0]      # its own helper, not the group's
    # an edit to the guard's own line is no block to compare: alone as well
    sources["k1"] = _guarded("4.0f", "k1").replace("#ifndef SC_C_PRELUDE\n",
                                                   "#ifndef SC_C_PRELUDE  // mine\n")
    mods = runtime.load_group(sources, list(sources), lang="c")
    assert mods["k1"] is not mods["k0"]
    mods["k1"].call("k1", x, y, 2)
    assert y.tolist() == [4.0, 4.0]


def test_a_group_that_does_not_build_together_builds_each_kernel_alone():
    # the same helper unguarded in both: one translation unit refuses it, each alone is fine
    plain = ("#include <stdint.h>\nstatic float twice(float v) { return 2.0f * v; }\n"
             "void NAME(const float* x, float* y, int64_t n) "
             "{ for (int64_t i = 0; i < n; ++i) y[i] = twice(x[i]); }\n")
    sources = {n: plain.replace("NAME", n) for n in ("a", "b")}
    mods = runtime.load_group(sources, list(sources), lang="c")
    assert mods["a"] is not mods["b"]
    y = torch.empty(1)
    mods["b"].call("b", torch.ones(1), y, 1)
    assert y.tolist() == [2.0]
    # a kernel that does not build alone either names itself
    sources["b"] = sources["b"].replace("twice(x[i])", "undefined_name")
    with pytest.raises(BuildError) as e:
        runtime.load_group(sources, list(sources), lang="c")
    assert "b.c:" in e.value.log
