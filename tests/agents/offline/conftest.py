"""Helpers for the offline agents' tests: problems from source, candidates run in-process."""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
from stitchcuda_lab.graph import analyse
from stitchcuda_lab.problem import problem_from_source

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def make_problem(body: str, name: str = "p"):
    return problem_from_source(HEADER + textwrap.dedent(body), name=name)


def load_candidate(candidate, name: str = "cand"):
    """Import a candidate's module source as a fresh module (kernels build on import)."""
    mod = types.ModuleType(f"stitch_test_{name}_{candidate.id}")
    sys.modules[mod.__name__] = mod
    code = compile(candidate.module_source(), f"<candidate {candidate.id}>", "exec")
    exec(code, mod.__dict__)  # noqa: S102  (the candidate is what is under test)
    return mod


def run_both(problem, candidate, device: str = "cpu", seed: int = 0):
    """(reference outputs, candidate outputs, reference model, candidate model) on fresh inputs."""
    mod = load_candidate(candidate, problem.name)
    ns = problem.namespace()
    init = ns.get("get_init_inputs", list)()
    torch.manual_seed(42)
    ref = ns["Model"](*init).to(device)
    torch.manual_seed(42)
    new = mod.ModelNew(*init).to(device)
    inputs = problem.make_inputs(device=device, seed=seed)
    # cuDNN's convolutions in fp32 arithmetic on both sides: by default PyTorch lets them run
    # on TF32 tensor cores, 3e-4 away from the fp32 result our dense convolution computes (the
    # Verifier judges that against float64; these tests compare with the reference alone)
    tf32, torch.backends.cudnn.allow_tf32 = torch.backends.cudnn.allow_tf32, False
    try:
        with torch.no_grad():
            want = ref(*[x.clone() if torch.is_tensor(x) else x for x in inputs])
            got = new(*[x.clone() if torch.is_tensor(x) else x for x in inputs])
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    return want, got, ref, new


def assert_close(got, want, atol=1e-4, rtol=1e-4):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, atol, rtol)
        return
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.is_floating_point():
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
    else:
        assert torch.equal(got, want)


def generate(problem, settings, device: str = "cpu"):
    """(graph, plan, first candidate) through the offline agents."""
    graph = analyse(problem, device=device, profile=False, settings=settings)
    plan = OfflinePlanner().plan(problem, graph, settings)
    cand = OfflineCoder().code(problem, graph, plan, settings, iteration=0)[0]
    return graph, plan, cand


@pytest.fixture(autouse=True)
def _isolated_kernel_cache(tmp_path_factory, monkeypatch):
    # generated programs call runtime.load, which reads the cache folder from the environment
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kcache"))


@pytest.fixture(scope="package")
def judge(tmp_path_factory, make_settings):
    """One CPU Verifier for the offline agents' tests that only need verdicts: starting a judge
    (its processes import torch) costs about ten seconds on two cores, a verdict two. Each
    candidate still runs in a process of its own; the shared part is the judge and its cache."""
    from stitchcuda_lab.verifier.options import VerifyOptions
    from stitchcuda_lab.verifier.worker import Worker

    settings = make_settings(tmp_path_factory.mktemp("judge"))   # the defaults of `settings`
    worker = Worker("cpu", cache_dir=settings.cache_dir)

    def verify(problem, cand):
        return worker.verify(problem.source, cand.module_source(), replaced=cand.replaced,
                             kept=cand.kept, options=VerifyOptions.from_settings(settings),
                             timeout=300)

    yield verify
    worker.close()


# -- CUDA source compiled to PTX without a GPU: nvcc, else NVRTC --------------------------------
def _nvrtc_library() -> ctypes.CDLL | None:
    """libnvrtc: the ``nvidia-cuda-nvrtc-cu12`` wheel's where it is installed, else the
    system's; None when there is neither."""
    paths: list[str] = []
    try:
        import nvidia.cuda_nvrtc as wheel   # a namespace package: no __file__
        paths += [str(f) for d in wheel.__path__ for f in sorted(Path(d, "lib").glob(
            "libnvrtc.so*")) if "builtins" not in f.name and ".alt." not in f.name]
    except ImportError:
        pass
    found = ctypes.util.find_library("nvrtc")
    paths += [found] if found else []
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _nvrtc_errors(lib: ctypes.CDLL, source: str, name: str, cubin: bool = False,
                  arch: str = "90") -> str:
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None,
                              None) != 0:
        return f"{name}: NVRTC could not take the source"
    opts = [f"--gpu-architecture={'sm' if cubin else 'compute'}_{arch}".encode(), b"-std=c++17"]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return "" if status == 0 else f"{name}:\n{log.value.decode(errors='replace')[-4000:]}"


def cuda_compile_errors(sources: dict[str, str], tmp_path: Path, cubin: bool = False,
                        arch: str = "90") -> str:
    """Each CUDA source (name -> code; one program each: kernel names repeat across them)
    compiled to PTX for sm_90 (``arch``: another): the front end is where a template's
    mistake shows; ``cubin``: to machine code, where the assembler checks the kernel's
    resources (its shared memory).
    The compilers' errors, "" where all compile; skips the calling test where there is
    neither nvcc nor NVRTC."""
    if shutil.which("nvcc"):
        files = []
        for name, code in sources.items():
            files.append(tmp_path / f"{name}.cu")
            files[-1].write_text(code)
        proc = subprocess.run(["nvcc", f"-arch={'sm' if cubin else 'compute'}_{arch}",
                               "-std=c++17", "-cubin" if cubin else "-ptx",
                               "--output-directory", str(tmp_path), *map(str, files)],
                              capture_output=True, text=True, timeout=900, check=False)
        return "" if proc.returncode == 0 else proc.stderr[-4000:]
    lib = _nvrtc_library()
    if lib is None:
        pytest.skip("neither nvcc nor NVRTC is installed (pip install nvidia-cuda-nvrtc-cu12)")
    return "\n".join(e for e in (_nvrtc_errors(lib, code, f"{name}.cu", cubin, arch)
                                 for name, code in sources.items()) if e)
