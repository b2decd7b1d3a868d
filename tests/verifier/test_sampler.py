"""The judge's samples of another process's threads: what code each address is in, and what
the verdict makes of them."""
import math
import os
import shutil
import subprocess
import sys
import time

import pytest

from stitchcuda_lab.verifier import sampler
from stitchcuda_lab.verifier.pool import frozen
from stitchcuda_lab.verifier.sampler import (LIBRARY, OWN, PACKAGE, PYTHON, RUNTIME, TORCH,
                                             TORCH_COMPUTE, Sampler, judge)

WORK = {
    "numpy": "import numpy as np\na = np.random.rand(2_000_000).astype('f4')\n"
             "def work():\n    np.maximum(a * np.float32(2) + np.float32(1), 0)\n",
    "relu": "x = torch.randn(2_000_000)\ndef work():\n    torch.relu(x * 2 + 1)\n",
    "mm": "x = torch.randn(384, 384)\ndef work():\n    x @ x\n",
    # a strided in-place ELU takes PyTorch's scalar loop, which calls libm's expf per element
    "elu": "buf = torch.randn(512, 4096)\nv = buf[:, ::2]\n"
           "def work():\n    torch.ops.aten.elu_(v.copy_(buf[:, 1::2]), 0.0, 1.0, 1.0)\n",
    "own": "import ctypes\nlib = ctypes.CDLL(sys.argv[1])\nbuf = (ctypes.c_float * 2_000_000)()\n"
           "def work():\n    lib.fused(buf, 2_000_000)\n",
}
C_SRC = """
void fused(float* y, long n) {
    for (long i = 0; i < n; ++i) { float v = 2.0f * y[i] + 1.0f; y[i] = v > 0.0f ? v : 0.0f; }
}
"""


def run_child(name: str, *args: str) -> subprocess.Popen:
    code = ("import sys, torch\ntorch.set_num_threads(1)\n" + WORK[name]
            + "work()\nprint('ready', flush=True)\nwhile True:\n    work()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def sampled(name: str, *args: str, own=(), stops: int = 25) -> dict:
    proc = run_child(name, *args)
    try:
        s = Sampler(proc.pid, own)
        for _ in range(stops):
            with frozen(proc.pid):
                s.sample()
            time.sleep(0.003)
        if not s.readable:
            pytest.skip("this process may not read another's stopped threads here")
        return s.report()
    finally:
        proc.kill()
        proc.wait()


def main_kind(report: dict) -> str:
    return max(report["kinds"], key=report["kinds"].get)


def test_numpy_compute_is_another_packages_code_and_never_allowed():
    r = sampled("numpy")
    assert main_kind(r) == PACKAGE and "_multiarray_umath" in " ".join(r["where"][PACKAGE])
    found = judge(r, compute_allowed=True, library_allowed=True)
    assert found and "compiled code not the candidate's" in found and "_multiarray_umath" in found


def test_pytorch_kernels_are_named_and_count_only_where_compute_is_not_kept():
    r = sampled("relu")
    assert main_kind(r) == TORCH_COMPUTE
    assert any("kernel" in w for w in r["where"][TORCH_COMPUTE])   # the kernel's own name
    assert "PyTorch's CPU kernels" in judge(r, compute_allowed=False, library_allowed=True)
    assert judge(r, compute_allowed=True, library_allowed=False) is None


@pytest.mark.skipif(not sampler.X86_64, reason="return addresses are read on x86-64 only")
def test_the_math_librarys_time_is_its_callers():
    r = sampled("elu", stops=40)
    libm_left = sum(n for w, n in r["where"].get(RUNTIME, {}).items() if w.startswith("libm"))
    through = {w: n for w, n in r["where"].get(TORCH_COMPUTE, {}).items() if "through libm" in w}
    assert through and all("elu" in w for w in through), r["where"]
    assert sum(through.values()) > libm_left, r["where"]


CALLS_EXP = """
#include <math.h>
__attribute__((noinline)) float helper(float x) { return x * 2.0f + 1.0f; }
float uses_exp(float x) { return expf(helper(x)) + 1.0f; }
"""


def _read_self(at: int, size: int) -> bytes:
    try:
        with open("/proc/self/mem", "rb", buffering=0) as mem:
            mem.seek(at)
            return mem.read(size)
    except (OSError, ValueError, OverflowError):
        return b""


def _returns_into(lib, maps) -> dict[str, int]:
    """Return addresses in ``lib``'s code, by where their call goes: "libm" (expf, through
    the PLT) and "own" (its helper)."""
    m = next(m for m in maps if m.path == lib)
    code = _read_self(m.start, m.end - m.start)
    found = {}
    for i in range(6, len(code)):
        if code[i - 5] != 0xE8 and code[i - 6:i - 4] != b"\xff\x15":
            continue   # no call ends here (call_target says so too, at a read per byte)
        target = sampler.call_target(m.start + i, _read_self)
        into = next((x for x in maps if target is not None and x.start <= target < x.end), None)
        if into is not None:
            key = "libm" if os.path.basename(into.path).startswith("libm") else \
                "own" if into.path == lib else None
            if key:
                found.setdefault(key, m.start + i)
    return found


def _library(tmp_path, name: str, source: str):
    import ctypes
    (tmp_path / f"{name}.c").write_text(source)
    lib = tmp_path / f"lib{name}.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(tmp_path / f"{name}.c"), "-o", str(lib),
                    "-lm"], check=True)
    k = ctypes.CDLL(str(lib))
    k.uses_exp.restype, k.uses_exp.argtypes = ctypes.c_float, [ctypes.c_float]
    assert abs(k.uses_exp(0.5) - (math.exp(2.0) + 1)) < 1e-4   # and its PLT slots are bound
    return str(lib)


@pytest.mark.skipif(not sampler.X86_64 or shutil.which("cc") is None,
                    reason="return addresses are read on x86-64 only; no C compiler")
def test_the_caller_is_the_gravest_return_address_of_a_call_into_the_math_library(tmp_path):
    import ctypes
    caller = _library(tmp_path, "caller", CALLS_EXP)
    # not the same bytes as the caller's: the same build id would make each a copy of the
    # other, which is what a process whose first Sampler sees both loaded calls them
    forger = _library(tmp_path, "forger", CALLS_EXP + "\nint forger_mark = 1;\n")
    maps = sampler.mappings(os.getpid())
    into_libm = _returns_into(caller, maps)["libm"]
    forged = _returns_into(forger, maps)["libm"]     # a real call into libm, of its own
    to_helper = _returns_into(forger, maps)["own"]   # a call that goes elsewhere
    libm = next(m.path for m in maps if os.path.basename(m.path).startswith("libm."))
    nested = _returns_into(libm, maps)["libm"]       # one math function called by another
    # the forger's library is the candidate's own; the caller's, in its folder but not one the
    # judge built, is another package's (graver)
    s = Sampler(os.getpid(), own_folders=(str(tmp_path),), own_files={forger})
    s.maps = maps

    def caller(*words):
        stack = (ctypes.c_uint64 * sampler.STACK_WORDS)(*words)
        return s._caller(ctypes.addressof(stack), "libm.so.6")
    number, code = 12345, next(m.start for m in maps if "libc10" in m.path)   # no return address
    assert caller(number, code, nested, forged) == (OWN, "libforger.so (through libm.so.6)")
    # a word of its own written into the math function's frame, next to the real caller's:
    # the graver names the stop
    assert caller(number, forged, to_helper, nested, into_libm) == (
        PACKAGE, "libcaller.so (through libm.so.6)")
    assert caller(number, code, to_helper) is None   # no call into the math library at all
    words = [number] * (sampler.STACK_WORDS - 1) + [into_libm, into_libm]
    assert caller(*words[:sampler.STACK_WORDS]) == (PACKAGE, "libcaller.so (through libm.so.6)")
    assert caller(*([number] * sampler.STACK_WORDS)) is None   # past the window: not read


def test_a_call_is_followed_to_its_target_through_a_plt_stub():
    memory = {0x1000: bytes([0x90, 0xE8]) + (0x100).to_bytes(4, "little", signed=True),
              0x1106: bytes.fromhex("f30f1efa f2ff25") + (0x1000).to_bytes(4, "little",
                                                                                signed=True),
              0x2111: (0xABCDEF).to_bytes(8, "little"),                 # the PLT's slot
              0x3000: bytes([0xFF, 0x15]) + (0x0FFA).to_bytes(4, "little", signed=True),
              0x4000: (0x1234).to_bytes(8, "little"),                   # call [rip + d]'s slot
              0x1234: bytes(16),                                        # no stub there
              0x5000: bytes([0x90, 0x90, 0x90, 0x90, 0xFF, 0xD0])}      # call rax

    def read(at, size):
        for base, raw in memory.items():
            if base <= at < base + len(raw):
                return raw[at - base:at - base + size]
        return b""
    assert sampler.call_target(0x1006, read) == 0xABCDEF    # call rel32 -> endbr; bnd jmp [slot]
    assert sampler.call_target(0x3006, read) == 0x1234      # call [rip + d], no stub after it
    assert sampler.call_target(0x5006, read) is None        # a register's target is unknown
    assert sampler.call_target(0x9000, read) is None        # unreadable


def test_a_gemm_is_library_work():
    r = sampled("mm")
    assert main_kind(r) == LIBRARY
    assert judge(r, compute_allowed=False, library_allowed=True) is None
    assert "vendor library" in judge(r, compute_allowed=False, library_allowed=False)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_candidates_own_library_is_its_own_work(tmp_path):
    (tmp_path / "k.c").write_text(C_SRC)
    lib = tmp_path / "lib_k.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", str(tmp_path / "k.c"), "-o", str(lib)],
                   check=True)
    r = sampled("own", str(lib), own=(str(tmp_path),))
    assert main_kind(r) == OWN and "lib_k.so" in r["where"][OWN]
    assert judge(r, compute_allowed=False, library_allowed=False) is None


def test_a_copy_of_a_known_library_under_a_new_name_is_that_library(tmp_path):
    import numpy  # noqa: F401  (its compiled core, mapped here)
    core = next(m.path for m in sampler.mappings(os.getpid()) if "_multiarray_umath" in m.path)
    copy = tmp_path / "libfast_kernels.so"
    shutil.copy(core, copy)
    s = Sampler(os.getpid(), (str(tmp_path),))
    assert s._file_kind(str(copy), copy.name) == PACKAGE
    own = tmp_path / "lib_mine.so"
    own.write_bytes(b"\x7fELF" + b"\0" * 60)   # not a known build: the candidate's
    assert s._file_kind(str(own), own.name) == OWN
    # where the judge says which libraries it handed over, any other there is not the
    # candidate's (torch.compile's, written to a cache in the sandbox's folder)
    s = Sampler(os.getpid(), (str(tmp_path),), own_files={str(own)})
    other = tmp_path / "inductor" / "c2x.so"
    other.parent.mkdir()
    other.write_bytes(b"\x7fELF" + b"\1" * 60)
    assert s._file_kind(str(own), own.name) == OWN
    assert s._file_kind(str(other), other.name) == PACKAGE
    assert s._file_kind("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6") == RUNTIME
    exe = os.path.realpath(sys.executable)
    assert s._file_kind(exe, os.path.basename(exe)) == PYTHON


def test_a_copy_named_as_neutral_code_outside_the_installed_folders_is_what_it_copies(tmp_path):
    """numpy's core under a folder named torch, or named as the C runtime, where the candidate
    may write (not its own folders): by its build id, not by its name."""
    import numpy  # noqa: F401
    core = next(m.path for m in sampler.mappings(os.getpid()) if "_multiarray_umath" in m.path)
    s = Sampler(os.getpid(), (str(tmp_path / "own"),))
    for where in (tmp_path / "x" / "torch" / "lib" / "libtorch_extra.so",
                  tmp_path / "y" / "libm.so.6"):
        where.parent.mkdir(parents=True)
        shutil.copy(core, where)
        assert s._file_kind(str(where), where.name) == PACKAGE, where


def test_the_kernels_clock_page_is_the_runtimes_and_other_anonymous_code_a_librarys():
    s = Sampler(os.getpid())
    vdso = next((m for m in sampler.mappings(os.getpid()) if m.path == "[vdso]"), None)
    if vdso is None:
        pytest.skip("no vDSO mapped here")
    assert s._name_in(vdso, vdso.start) == (RUNTIME, "[vdso]")
    assert s._name_in(sampler.Mapping(0, 1, 0, ""), 0)[0] == LIBRARY


def test_the_verdict_needs_a_share_of_the_working_samples():
    # the interpreter and PyTorch's bookkeeping say nothing either way
    r = {"kinds": {PYTHON: 40, TORCH: 10, OWN: 3, PACKAGE: 2}, "where": {PACKAGE: {"x.so": 2}}}
    assert judge(r, compute_allowed=False, library_allowed=False)   # 2 of 5 working samples
    r["kinds"][OWN] = 30
    assert judge(r, compute_allowed=False, library_allowed=False) is None   # 2 of 32
    r = {"kinds": {OWN: 0, PACKAGE: 1}, "where": {}}
    assert judge(r, compute_allowed=False, library_allowed=False) is None   # one sample


def test_the_share_leaves_out_what_may_be_handed_over_and_copies():
    # a kept convolution takes most of a forward: the epilogue the candidate claims, done by
    # PyTorch, is a small share of all samples but all of the rest; so with copies it adds
    r = {"kinds": {LIBRARY: 30, OWN: 1, TORCH_COMPUTE: 3}, "where": {TORCH_COMPUTE: {"k": 3}}}
    assert judge(r, compute_allowed=False, library_allowed=True)
    assert judge(r, compute_allowed=True, library_allowed=True) is None
    r = {"kinds": {sampler.TORCH_COPY: 30, TORCH_COMPUTE: 3}, "where": {TORCH_COMPUTE: {"k": 3}}}
    assert judge(r, compute_allowed=False, library_allowed=True)
    r = {"kinds": {LIBRARY: 30, OWN: 20, TORCH_COMPUTE: 3}, "where": {}}
    assert judge(r, compute_allowed=False, library_allowed=True) is None   # 3 of 23


def test_the_first_stop_that_finds_work_judges_alone():
    # a program can tell it was sampled once it is continued, so one that hands its work to
    # PyTorch until then and computes itself after shows it only at that first stop
    r = {"kinds": {PYTHON: 10, OWN: 20, TORCH_COMPUTE: 1}, "first": {TORCH_COMPUTE: 1},
         "where": {TORCH_COMPUTE: {"add_kernel": 1}}}
    found = judge(r, compute_allowed=False, library_allowed=True)
    assert found and found.startswith("the first stop") and "add_kernel" in found
    assert judge(r, compute_allowed=True, library_allowed=True) is None
    r["first"] = {OWN: 1, PYTHON: 1}
    assert judge(r, compute_allowed=False, library_allowed=True) is None


def test_the_first_working_stop_is_the_one_remembered():
    proc = run_child("relu")
    try:
        s = Sampler(proc.pid)
        # until a stop lands in the work (five in a row can all land between two calls on a
        # loaded two-core machine), at most 200
        for _ in range(200):
            with frozen(proc.pid):
                s.sample()
            if s.first or not s.readable:
                break
            time.sleep(0.003)
        if not s.readable:
            pytest.skip("this process may not read another's stopped threads here")
        assert s.first and any(k in sampler.WORKING for k in s.first)
        report = s.report()
        assert report["first"] == dict(s.first)
        # each kind says what it is in words, for the Profile tab
        assert set(report["labels"]) == set(report["kinds"])
        assert report["labels"].get(TORCH_COMPUTE, "PyTorch's CPU kernels") == (
            "PyTorch's CPU kernels")
    finally:
        proc.kill()
        proc.wait()


def test_mangled_names_read_as_their_identifiers():
    sym = ("_ZN2at6native4AVX212_GLOBAL__N_128clamp_min_scalar_kernel_implERNS_18"
           "TensorIteratorBaseEN3c106ScalarE")
    assert sampler._short(sym).startswith("clamp_min_scalar_kernel_impl")
    assert sampler._short("mkl_blas_avx512_sgemm_kernel_0") == "mkl_blas_avx512_sgemm_kernel_0"


# symbols of PyTorch's CPU library (torch 2.11, x86-64) where samples of these ops landed
_LOOP = "_ZN3c1012function_refIFvPPcPKlllEE11callback_fnI"
KERNELS = {
    # compute: ops no plan may hand to PyTorch (copysign, a bucketize's search and a histogram
    # once passed as copies for "copy" and "contiguous" inside their names; the sparse add's
    # static worker and the fake quantizer's loop, reached through a back-reference to
    # ``at``, as bookkeeping)
    _LOOP + "N2at6native4AVX216VectorizedLoop2dIZZZNS9_12_GLOBAL__N_115copysign_kernelERNS8_18"
    "TensorIteratorBaseEEN": False,
    "_ZN2at6native12_GLOBAL__N_127searchsorted_cpu_contiguousIflEEvRNS_6TensorERKS3_S6_RKbS6_":
        False,
    "_ZN2at6native12_GLOBAL__N_128histogramdd_out_cpu_templateILNS1_23BIN_SELECTION_ALGORITHM"
    "E0EEEvRKNS_6TensorE": False,
    "_ZN2at6nativeL38add_dense_sparse_worker_non_hybrid_cpuIfEEvRNS_6TensorERKN3c106ScalarE":
        False,
    _LOOP + "ZN2at18TensorIteratorBase15loop_2d_from_1dIZZZNS8_6native12_GLOBAL__N_128_fake_"
    "quantize_tensor_helperE": False,
    _LOOP + "ZN2at18TensorIteratorBase15loop_2d_from_1dIZNS8_6native12_GLOBAL__N_122cpu_masked_"
    "fill_kernelIfEEvRNS8": False,
    # copies, fills and ranges (aten.CHEAP): data moved or made, nothing computed
    _LOOP + "N2at6native4AVX216VectorizedLoop2dIZZZNSA_18direct_copy_kernelERNS8_18TensorIterator"
    "BaseEENKUlvE1_clEv": True,
    _LOOP + "N2at6native4AVX216VectorizedLoop2dIZZZNS9_12_GLOBAL__N_111fill_kernelERNS8_14Tensor"
    "IteratorERKNS_6Scal": True,
    _LOOP + "N2at6native4AVX216VectorizedLoop2dIZZZZNS9_12_GLOBAL__N_113arange_kernelERNS8_14"
    "TensorIteratorERKNS_6S": True,
    _LOOP + "ZN2at18TensorIteratorBase15loop_2d_from_1dIZZZZZNS8_6native4AVX211copy_kernelERNS8_"
    "14TensorIteratorEbE": True,
}


KERNELS.update({
    # a float <-> bf16 cast: a copy, whatever comes before "copy" in its name
    "_ZZZZN2at6native7DEFAULTL25reduced_float_copy_kernelERNS_18TensorIteratorBaseEbENKUlvE0_"
    "clEvENKUlvE0_clEvENKUlPPcPKlllE_clES7_S9_ll": True,
    # a backward op sums what it moves; a fill's name ahead of other words computes
    "_ZN2at6native12_GLOBAL__N_126unfold_backward_cpu_kernelERNS_6TensorERKS2_lll": False,
    "_ZN2at6native12_GLOBAL__N_119_fill_matrix_powersERNS_6TensorERKS2_i": False,
})


@pytest.mark.parametrize("sym", KERNELS)
def test_a_kernel_is_a_copy_only_where_its_op_is_one_by_whole_words(sym):
    assert sampler.KERNEL_SYMBOLS.search(sym), sym    # one of PyTorch's CPU kernels
    assert sampler.moves_data(sym) == KERNELS[sym], sampler.op_word(sym)
    assert sampler.kernel_kind(sym) == (sampler.TORCH_COPY if KERNELS[sym]
                                        else TORCH_COMPUTE)


@pytest.mark.parametrize("sym, kind", [
    # shape inference and the dispatcher's glue beside the kernels: neither way
    ("_ZN2at6native12_GLOBAL__N_129inferUnsqueezeGeometry_symintERKNS_6TensorEl", TORCH),
    ("_ZN3c104impl28wrap_kernel_functor_unboxed_INS0_6detail24WrapFunctionIntoFunctor_INS_26"
     "CompileTimeFunctionPointerIFN2at6TensorENS_6ScalarES6_EXadL_ZNS5_6native12_GLOBAL__N_112"
     "qadd_scalar2ILb0EEES6_S7_S6_EEEES6_NS_4guts8typelist8typelistIJS7_S6_EEEEES8_E4callEPNS_"
     "14OperatorKernelENS_14DispatchKeySetES7_S6_", TORCH),
    ("_ZN2at4_ops18upsample_nearest2d4callERKNS_6TensorEN3c108ArrayRefINS5_6SymIntEEESt8"
     "optionalIdESA_", TORCH),
    # a small convolution's slow path (im2col's copy, its argument check): the library's
    ("_ZZN2at6native12_GLOBAL__N_115unfolded2d_copyIhEEvPKT_PS3_lllllllllllENKUlllE_clEll",
     LIBRARY),
    ("_ZN2at6nativeL19check_shape_forwardIlEEvRKNS_6TensorERKN3c108ArrayRefIT_EES4_RKNS0_10"
     "ConvParamsIS7_EE", LIBRARY),
    # loops over elements whatever helper names their lambda (an ELU's is get_..._func), and
    # at::native lambdas whose namespace comes as a back-reference (sparse products, nonzero)
    ("_ZN3c1012function_refIFvPPcPKlllEE11callback_fnIN2at6native4AVX216VectorizedLoop2dIZNSA_"
     "31get_scalar_elu_elementwise_funcIffEEDaT0_SD_SD_EUlfE_ZNSA_35get_vectorized_elu_"
     "elementwise_funcIfLb1EEEDaT_SG_SG_EUlNS8_3vec4AVX210VectorizedIfEEE_EEEEvlS2_S4_ll",
     TORCH_COMPUTE),
    ("_ZN2at8internal15invoke_parallelIZNS_12parallel_forIZNS_6native5utils19parallel_sparse_"
     "csrIKiZNS3_12_GLOBAL__N_123spmm_reduce_kernel_implIdiLNS3_13ReductionTypeE0EEEvRKNS_6"
     "TensorESC_SC_SC_SC_EUlllE_EEvRKN5torch10headeronly6detail14TensorAccessorIN3c108ArrayRef"
     "IlEET_Lm1ENSF_16DefaultPtrTraitsElEEllRKT0_EUlllE_EEvlllRKSL_EUlllE_EEvlllSV_._omp_fn.0",
     TORCH_COMPUTE),
    ("_ZN3c1012function_refIFvPPcPKlllEE11callback_fnIZZZZN2at6native15nonzero_out_cpuERKNS8_6"
     "TensorERSA_ENKUlvE0_clEvENKUlvE_clEvENKUlllE_clEllEUlS2_S4_llE_EEvlS2_S4_ll",
     TORCH_COMPUTE),
    # a cast fbgemm does: a copy, not a GEMM
    ("_ZN6fbgemm19FloatToFloat16_avx2EPKfPNS_7float16Emb", sampler.TORCH_COPY),
    # ATen's special functions, called out of line from their kernels' loops (digamma, the
    # incomplete gamma's helpers, a Bessel function), and not the dispatch of an op so named
    ("_Z12calc_digammad", TORCH_COMPUTE),
    ("_Z16_igam_helper_facIdET_S0_S0_", TORCH_COMPUTE),
    ("_Z17bessel_j1_forwardIdET_S0_", TORCH_COMPUTE),
    ("_ZN2at4_ops7digamma4callERKNS_6TensorE", TORCH),
    # vector math inside compute kernels
    ("_ZN2at3vec4AVX210VectorizedIdE3setERKS3_S5_l", TORCH_COMPUTE),
    ("_ZN2at6native7DEFAULT12_GLOBAL__N_15fmaddERKNS_3vec7DEFAULT10VectorizedIN3c108BFloat16EE"
     "ESA_RKNS5_IfEESD_", TORCH_COMPUTE),
])
def test_what_sits_beside_the_kernels_is_named_for_what_it_does(sym, kind):
    assert sampler.classify_torch_symbol(sym) == kind, (sampler.op_word(sym), sym)


def test_back_references_and_literals_are_not_read_as_names():
    sym = (_LOOP + "N2at6native4AVX216VectorizedLoop2dIZZZNS9_12_GLOBAL__N_111fill_kernelERNS8_14"
           "TensorIteratorERKNS_6Scal")
    assert sampler.identifiers(sym)[-3:] == ["_GLOBAL__N_1", "fill_kernel", "TensorIterator"]
    # an ISA namespace ending in T, then a name: not a template parameter's back-reference
    assert sampler.op_word("_ZN2at6native7DEFAULT12_GLOBAL__N_111fill_kernelERNS_14Tensor"
                           "IteratorERKN3c106ScalarE") == "fill_kernel"
    # a template's literal argument (Lb1E) is no name
    assert "E" not in sampler.identifiers("_ZN2at6native4AVX214cpu_kernel_vecILb1EZN3foo"
                                          "11mul_kernelEvE")


def test_each_stop_reads_the_maps_again():
    """A file mapped over a library's code while the maps were read, then moved off once the
    program knew it was sampled: what is mapped at each stop names the address."""
    # numpy loaded after the Sampler was made (as a candidate loads a library), so no
    # earlier read of the maps names its addresses
    code = ("import sys\nsys.stdin.readline()\n" + WORK["numpy"]
            + "work()\nprint('ready', flush=True)\nwhile True:\n    work()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        s = Sampler(proc.pid, ("/nonexistent/own",))
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ready"
        # what a read would have found had the candidate's file covered everything then
        s.maps = [sampler.Mapping(0, 1 << 63, 0, "/nonexistent/own/code.bin")]
        for _ in range(25):
            with frozen(proc.pid):
                s.sample()
            time.sleep(0.003)
        if not s.readable:
            pytest.skip("this process may not read another's stopped threads here")
        assert OWN not in s.report()["kinds"] and s.kinds[PACKAGE] > 0
    finally:
        proc.kill()
        proc.wait()


def test_an_address_mapped_over_since_the_candidate_loaded_is_named_the_graver_way(tmp_path):
    """numpy's code where the interpreter's was (a copy mapped over a library the Sampler saw
    first), or the interpreter's name kept for it: the graver of the two names counts."""
    import numpy  # noqa: F401
    core = next(m.path for m in sampler.mappings(os.getpid()) if "_multiarray_umath" in m.path)
    s = Sampler(os.getpid(), (str(tmp_path),))
    copy = tmp_path / "x.so"
    shutil.copy(core, copy)
    exe = os.path.realpath(sys.executable)
    first = next(b for b in s.before if b.path == exe)
    s.before = [first]
    s.maps = [sampler.Mapping(first.start, first.end, first.offset, str(copy))]
    assert s.name(first.start)[0] == PACKAGE
    s.maps = [sampler.Mapping(first.start, first.end, first.offset, "")]   # anonymous now
    assert s.name(first.start)[0] == sampler.LIBRARY   # graver than the interpreter


def test_a_renamed_copy_of_pytorchs_cpu_library_is_read_by_its_symbols(tmp_path):
    import torch  # noqa: F401
    lib = next(m for m in sampler.mappings(os.getpid())
               if os.path.basename(m.path).startswith("libtorch_cpu"))
    s = Sampler(os.getpid(), (str(tmp_path / "own"),))
    copy = tmp_path / "libfoo.so"
    os.symlink(lib.path, copy)   # the same file by another name (a copy reads the same)
    assert s._is_torch_cpu(str(copy), copy.name)


class _Watch:
    """A sampler whose stops find a thread computing only where ``working_at`` says."""

    def __init__(self, working_at):
        self.working_at, self.stops, self.working, self.calls = working_at, 0, 0, 0
        self.readable = True

    def stopped_call(self, stops):
        self.calls += 1
        self.stops += len(stops)
        self.working += self.working_at(self.calls) * len(stops)


def _timed_with(watch, call_ms=5.0, timing_trials=3):
    """The judge's timing loop (Job.timed) on calls its clock sees take ``call_ms``, with
    ``watch`` as its sampler."""
    from types import SimpleNamespace

    from stitchcuda_lab.verifier.verify import Job
    job = Job.__new__(Job)
    job.opts = SimpleNamespace(warmup=1, timing_trials=timing_trials)
    job.calls_per_round = lambda: 3
    job.sampler, job.wide, job.device = watch, {}, "cpu"
    job.deadline = time.monotonic() + 60
    job.wide_way_due = lambda: False

    def call(seed, stops=None, keep=True):
        if stops:
            watch.stopped_call(stops)
        return call_ms, call_ms, call_ms

    job.timed(call, end_round=lambda seeds, left: None)
    return watch


def test_calls_are_sampled_on_until_enough_samples_found_a_thread_computing():
    from stitchcuda_lab.verifier.verify import (SAMPLE_WORKING_LEAST, SAMPLED_CALLS_MAX,
                                                SAMPLED_CALLS_MIN, STOPS_PER_CALL)
    # stops that land in the interpreter (a loaded host) until the 7th sampled call
    late = _timed_with(_Watch(lambda n: n >= 7))
    assert late.working >= SAMPLE_WORKING_LEAST
    assert late.calls == 7 + -(-SAMPLE_WORKING_LEAST // STOPS_PER_CALL) - 1
    # never a thread computing: sampled up to the cap, then given up
    assert _timed_with(_Watch(lambda n: 0)).calls == SAMPLED_CALLS_MAX
    # every stop finds one: the usual half of the timed calls (at least SAMPLED_CALLS_MIN)
    assert _timed_with(_Watch(lambda n: 1)).calls == SAMPLED_CALLS_MIN
    # calls too short for a stop to land in: no more than usual
    assert _timed_with(_Watch(lambda n: 0), call_ms=0.5).calls == SAMPLED_CALLS_MIN
    # stops that cannot be read: no more than the calls drawn at random
    unreadable = _Watch(lambda n: 0)
    unreadable.readable = False
    assert _timed_with(unreadable).calls <= SAMPLED_CALLS_MIN


def test_a_stack_pointer_anywhere_reads_no_words_and_raises_nothing():
    with open("/proc/self/mem", "rb", buffering=0) as mem:
        for sp in (0, 8, 1 << 47, (1 << 63) - 8, 0xFFFFFFFFFFFFFFF0):
            assert sampler._stack_words(mem, sp) == []


def test_a_fifo_where_a_library_was_mapped_is_no_image_and_no_wait(tmp_path):
    fifo = tmp_path / "lib_gone.so"
    os.mkfifo(fifo)
    assert sampler.image(str(fifo)) is None      # an open of it for reading would block


def test_the_candidates_warm_up_calls_are_not_kept_for_checking():
    """Warm-ups come before the first round, so no check can pick them: on CUDA their outputs
    and inputs are not copied out of the arena (three warm-ups of a 6 GB activation held
    36 GB of the judge's GPU memory); every timed call after them is."""
    from types import SimpleNamespace

    from stitchcuda_lab.verifier.verify import Job
    job = Job.__new__(Job)
    job.opts = SimpleNamespace(warmup=3, timing_trials=4)
    job.calls_per_round = lambda: 2
    job.sampler, job.wide, job.device = None, {}, "cpu"
    job.deadline = time.monotonic() + 60
    job.wide_way_due = lambda: False
    kept: list[bool] = []

    def call(seed, stops=None, keep=True):
        kept.append(keep)
        return 1.0, 1.0, 1.0
    job.timed(call, end_round=lambda seeds, left: None)
    assert kept[:3] == [False] * 3 and kept[3:] and all(kept[3:])
