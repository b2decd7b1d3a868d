"""Coverage of the offline agents: each op family in tests/fixtures/coverage (small problems in
KernelBench form) gets a candidate whose kernels replace every computing op but the library's
GEMMs, and that candidate matches eager and passes the real Verifier on CPU. The CUDA source of
the same plans is checked as text (64-bit index math past 2^31 elements); compiling and running
it is a ``gpu`` test."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from stitchcuda_lab.problem import problem_from_source

from .conftest import assert_close, cuda_compile_errors, generate, run_both

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "coverage"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.py"))


def fixture(name: str):
    path = FIXTURES / f"{name}.py"
    return problem_from_source(path.read_text(), name=name, origin=str(path))


@pytest.mark.parametrize("name", NAMES)
def test_each_family_gets_kernels_for_every_computing_op(name, settings):
    problem = fixture(name)
    _graph, plan, cand = generate(problem, settings)
    assert plan.blockers() == [], plan.blockers()
    assert cand.kernels and cand.replaced
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("name", NAMES)
def test_each_family_passes_the_verifier_on_cpu(name, settings, judge):
    problem = fixture(name)
    _, _, cand = generate(problem, settings)
    verdict = judge(problem, cand)
    assert verdict.status == "pass", verdict.reason


# -- CUDA source of the same families at full size: shapes only, nothing allocated ------------

def _graph(calls: list[tuple], inputs: dict[str, tuple[list[int], str]]):
    """A hand-made Graph: ``inputs`` name -> (shape, dtype); ``calls`` (name, target, args,
    shape, dtype), the last one the output."""
    from stitchcuda_lab import aten
    from stitchcuda_lab.agents.offline.helpers import contiguous_strides
    from stitchcuda_lab.graph import Graph, Node

    nodes = [Node(name=k, op="placeholder", target="", op_class="input", shape=s, dtype=d,
                  stride=contiguous_strides(s), kind="input", input_index=i)
             for i, (k, (s, d)) in enumerate(inputs.items())]
    nodes += [Node(name=k, op="call_function", target=t, op_class=aten.category(t), args=a,
                   shape=s, dtype=d, stride=contiguous_strides(s), lowers_to=[t])
              for k, t, a, s, d in calls]
    return Graph(nodes=nodes, outputs=[{"node": calls[-1][0]}], capture="export",
                 device="cuda")


BIG = [1 << 16, 1 << 16]        # 2^32 elements: offsets past 2^31 - 1


@pytest.mark.parametrize("family", ["pointwise", "scan", "cross_entropy_rows", "row_norm",
                                    "pool"])
def test_cuda_index_math_is_64_bit_past_two_to_the_31(family):
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.lower import build_spec

    x = {"node": "x"}
    if family == "pointwise":
        g = _graph([("y", "aten.add.Tensor", [x, {"node": "bias"}], BIG, "float32"),
                    ("z", "aten.relu.default", [{"node": "y"}], BIG, "float32")],
                   {"x": (BIG, "float32"), "bias": ([BIG[1]], "float32")})
        ops = ["y", "z"]
    elif family == "scan":
        g = _graph([("c", "aten.cumsum.default", [x, 1], BIG, "float32")], {"x": (BIG, "float32")})
        ops = ["c"]
    elif family == "pool":   # the output has 2^30 elements, the pooled input 2^32
        xs, os_ = [1] + BIG, [1, BIG[0] // 2, BIG[1] // 2]
        g = _graph([("r", "aten.relu.default", [x], xs, "float32"),
                    ("p", "aten.max_pool2d.default", [{"node": "r"}, [3, 3], [2, 2], [1, 1]], os_,
                     "float32")], {"x": (xs, "float32")})
        ops = ["r", "p"]
    elif family == "cross_entropy_rows":
        g = _graph([("lse", "aten.logsumexp.default", [x, [1], True], [BIG[0], 1], "float32"),
                    ("pick", "aten.gather.default", [x, 1, {"node": "t"}], [BIG[0], 1], "float32"),
                    ("d", "aten.sub.Tensor", [{"node": "lse"}, {"node": "pick"}], [BIG[0], 1],
                     "float32")],
                   {"x": (BIG, "float32"), "t": ([BIG[0], 1], "int64")})
        ops = ["lse", "pick", "d"]
    else:
        g = _graph([("n", "aten.linalg_vector_norm.default", [x, 2, [1], True], [BIG[0], 1],
                     "float32"),
                    ("q", "aten.div.Tensor", [x, {"node": "n"}], BIG, "float32")],
                   {"x": (BIG, "float32")})
        ops = ["n", "q"]
    spec = build_spec(g, ops, "k0")
    src = emit_cuda(spec)
    assert "(unsigned)" not in src and "U)" not in src      # no 32-bit index math
    assert "long long" in src
    if family == "cross_entropy_rows":
        assert "(long long)(" in src and "* 1LL]" in src   # the target's offset in 64 bits
    if family != "pointwise":
        assert f"{BIG[0]}LL" in src


def test_an_adaptive_window_is_bounded_in_64_bits_where_the_index_math_is_32():
    """70000 inputs pooled to 40000 outputs: the window's start o * 70000 / 40000 passes 2^31
    in its product, though every tensor is small."""
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.lower import build_spec

    g = _graph([("p", "aten.adaptive_avg_pool1d.default", [{"node": "x"}, [40000]],
                 [1, 2, 40000], "float32")], {"x": ([1, 2, 70000], "float32")})
    src = emit_cuda(build_spec(g, ["p"], "k0"))
    assert "const int p_i = (int)i;" in src
    assert "p_lo0 = (int)((long long)p_o0 * 70000LL / 40000LL);" in src


def test_cuda_index_math_stays_32_bit_when_small():
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.lower import build_spec

    shape = [64, 256]
    g = _graph([("y", "aten.add.Tensor", [{"node": "x"}, {"node": "bias"}], shape, "float32")],
               {"x": (shape, "float32"), "bias": ([1, 256], "float32")})
    assert "(unsigned)" in emit_cuda(build_spec(g, ["y"], "k0"))
    g = _graph([("p", "aten.avg_pool2d.default", [{"node": "x"}, [3, 3], [2, 2], [1, 1]],
                 [1, 32, 128], "float32")], {"x": ([1] + shape, "float32")})
    src = emit_cuda(build_spec(g, ["p"], "k0"))
    assert "const int p_i = (int)i;" in src and "long long p_" not in src


def test_each_familys_cuda_program_compiles(settings, tmp_path):
    """The plans of every family made for the GPU (the graph taken on the CPU, its device
    switched): each gets CUDA kernels for every computing op, and they compile (to PTX, with
    nvcc or NVRTC: the front end is where a template's mistake shows)."""
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner

    sources = {}
    for name in NAMES:
        problem = fixture(name)
        graph, _, _ = generate(problem, settings)
        cuda = dataclasses.replace(graph, device="cuda")
        plan = OfflinePlanner().plan(problem, cuda, settings)
        plan.device = "cuda"
        assert plan.blockers() == [], (name, plan.blockers())
        cand = OfflineCoder().candidate(problem, cuda, plan, {})
        assert cand.kernels and {k.lang for k in cand.kernels} == {"cuda"}, name
        sources[name] = "\n".join(k.code for k in cand.kernels)
    errors = cuda_compile_errors(sources, tmp_path)
    assert errors == "", errors


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_each_family_matches_eager_on_cuda(name, settings):
    problem = fixture(name)
    settings = settings.replace(device="cuda")
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    from stitchcuda_lab.graph import analyse

    graph = analyse(problem, device="cuda", profile=False, settings=settings)
    plan = OfflinePlanner().plan(problem, graph, settings)
    assert plan.blockers() == [], plan.blockers()
    cand = OfflineCoder().code(problem, graph, plan, settings, iteration=0)[0]
    assert cand.kernels and all(k.lang == "cuda" for k in cand.kernels)
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, device="cuda", seed=seed)
        assert_close(got, want)


SCANS_LONG = {   # rows longer and shorter than a chunk (256 threads x ipt), none a multiple
    "masked": ("torch.cumsum(x * m, dim=1)", "torch.rand(6, 3001)"),
    "reversed": ("torch.cumsum(x.flip(1), dim=1).flip(1) * x", "torch.randn(5, 700)"),
    "product": ("torch.cumprod(1.0 + x / 512, dim=1)", "torch.randn(4, 2049)"),
    "double": ("torch.cumsum(x, dim=1)", "torch.randn(3, 5000, dtype=torch.float64)"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SCANS_LONG))
@pytest.mark.parametrize("ipt", [1, 2, 4, 8])
def test_a_block_scan_of_several_elements_a_thread_matches_eager_on_cuda(name, ipt, settings):
    """The refine round's scan variants (``ipt`` consecutive elements a thread per chunk)
    against eager: masked, reversed with an epilogue reading the input, a product, float64."""
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    from stitchcuda_lab.graph import analyse
    body, draw = SCANS_LONG[name]
    problem = problem_from_source(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        f"    def forward(self, x, m):\n        return {body}\n\n"
        f"def get_inputs():\n    x = {draw}\n"
        "    return [x, torch.randint(0, 2, x.shape).bool()]\n\n"
        "def get_init_inputs():\n    return []\n", name=f"scan_{name}")
    settings = settings.replace(device="cuda")
    graph = analyse(problem, device="cuda", profile=False, settings=settings)
    plan = OfflinePlanner().plan(problem, graph, settings)
    first = OfflineCoder().candidate(problem, graph, plan, {})
    scans = [t for t, p in first.params["tasks"].items() if "ipt" in p]
    assert scans, first.params
    cand = OfflineCoder().candidate(problem, graph, plan, {t: {"ipt": ipt} for t in scans})
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, device="cuda", seed=seed)
        assert_close(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("body", [
    "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",   # 2 passes, 64 channels
    "torch.softmax(x[:, :32], dim=1)",                                  # 3 passes, strided
    "x - torch.logsumexp(x * 3.0, dim=1, keepdim=True) / 3.0",        # 64 of them, 3 passes
])
@pytest.mark.parametrize("cache", [True, False])
def test_a_thread_per_row_matches_eager_with_its_row_in_registers_or_not(body, cache, settings):
    """One thread per row (reductions over a middle dim): the row of at most THREAD_ROW_REGS
    elements kept in registers between passes (the default), or read again (the variant)."""
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    from stitchcuda_lab.graph import analyse
    problem = problem_from_source(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "class Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {body}\n\n"
        "def get_inputs():\n    return [torch.rand(3, 64, 33, 20)]\n\n"
        "def get_init_inputs():\n    return []\n", name="rows_in_registers")
    settings = settings.replace(device="cuda")
    graph = analyse(problem, device="cuda", profile=False, settings=settings)
    plan = OfflinePlanner().plan(problem, graph, settings)
    first = OfflineCoder().candidate(problem, graph, plan, {})
    tasks = {t: {"cache": cache} for t, p in first.params["tasks"].items() if "cache" in p}
    assert tasks, first.params
    cand = OfflineCoder().candidate(problem, graph, plan, tasks)
    assert cache == any("sc_cache[" in k.code and "extern __shared__" not in k.code
                        for k in cand.kernels)
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, device="cuda", seed=seed)
        assert_close(got, want)


def test_a_depthwise_convolution_past_two_to_the_31_is_tiled_with_64_bit_planes():
    """At four times KernelBench's conv_depthwise batch the input has 2^32 elements: a block
    stages 9 output rows' worth of one 256 x 512 plane in shared memory (11 input rows), the
    plane's offsets are 64-bit and the coordinates inside it 32-bit."""
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.launch import launch_config
    from stitchcuda_lab.agents.offline.lower import build_spec

    xs, ws, os_ = [256, 128, 256, 512], [128, 1, 3, 3], [256, 128, 254, 510]
    g = _graph([("c", "aten.conv2d.default", [{"node": "x"}, {"node": "w"}, None, [1, 1],
                                              [0, 0], [1, 1], 128], os_, "float32")],
               {"x": (xs, "float32"), "w": (ws, "float32")})
    spec = build_spec(g, ["c"], "k0")
    assert spec.kind == "pool" and [o.node for o in spec.operands] == ["x", "w", "c"]
    src = emit_cuda(spec)
    assert "__shared__ float p_tile[5632];" in src                   # 11 rows x 512
    assert "const long long p_t = (long long)(p_b / 29LL);" in src    # 29 tiles per plane
    assert "const long long w_in0 = p_t * 131072LL;" in src
    assert "const long long p_i = p_t * 129540LL + (p_oh0 + p_r) * 510 + p_o1;" in src
    assert "p_row[p_k0 * 512 + p_k1 * 1] * p_w[p_k0 * 3 + p_k1]" in src
    assert launch_config(spec)["blocks"] == 256 * 128 * 29


def test_pool_windows_past_two_to_the_31_divide_once_in_64_bits():
    """A max pool over many small planes (2^32 inputs): one 64-bit division per output to
    its plane, 32-bit coordinates inside it."""
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.lower import build_spec

    xs, os_ = [1 << 16, 256, 256], [1 << 16, 128, 128]
    g = _graph([("p", "aten.max_pool2d.default", [{"node": "x"}, [2, 2], [2, 2]], os_,
                 "float32")], {"x": (xs, "float32")})
    src = emit_cuda(build_spec(g, ["p"], "k0"))
    assert "const long long p_t = p_i / 16384LL;" in src
    assert "int p_r = (int)(p_i - p_t * 16384LL);" in src
    assert "const int p_o1 = p_r % 128;" in src and "const int p_x0 = p_s0 + p_k0 * 1;" in src
    assert "const long long w_in0 = p_t * 65536LL;" in src


def test_a_grouped_convolution_with_several_channels_per_group_stays_in_the_library(settings):
    from .conftest import make_problem
    problem = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.g = nn.Conv2d(8, 4, 3, groups=4)    # two input channels per group
            def forward(self, x):
                return torch.relu(self.g(x))
        def get_inputs():
            return [torch.randn(2, 8, 9, 9)]
        def get_init_inputs():
            return []
    """)
    graph, plan, cand = generate(problem, settings)
    assert "aten.conv2d.default" in cand.kept and "aten.conv2d.default" not in cand.replaced
    assert "aten.relu.default" in cand.replaced
    # still the library convolution at the head of its epilogue, and one that can run
    # channels-last
    from stitchcuda_lab.agents.offline.program import channels_last_convs
    from stitchcuda_lab.agents.offline.rewrite import rewrite
    assert [t.kind for t in plan.tasks if "conv2d" in t.ops] == ["gemm_epilogue"]
    assert list(channels_last_convs(rewrite(graph))) == ["conv2d"]
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("name,convs", [("conv_depthwise2d", ["aten.conv2d.default"]),
                                        ("conv_depthwise_1d_3d", ["aten.conv1d.padding",
                                                                  "aten.conv3d.default"])])
def test_depthwise_convolutions_are_computed_by_our_kernels(name, convs, settings):
    """Not left to cuDNN or oneDNN: the program calls no convolution, and the candidate
    claims each one as replaced (the Verifier then rejects a library convolution in its
    trace)."""
    _graph_, plan, cand = generate(fixture(name), settings)
    assert set(convs) <= set(cand.replaced), cand.replaced
    assert not [k for k in cand.kept if "conv" in k], cand.kept
    assert all(t.kind == "reduction_fusion" for t in plan.tasks if set(t.ops) & {
        "conv1d", "conv2d", "conv3d"})


# -- dense convolutions of few input channels (pool.dense_form): a kernel of ours on the GPU --

def _planned_for_the_gpu(name: str, settings):
    """(problem, graph switched to the GPU, plan) of a coverage fixture traced on the CPU."""
    from stitchcuda_lab.agents.offline import OfflinePlanner

    problem = fixture(name)
    graph, _, _ = generate(problem, settings)
    cuda = dataclasses.replace(graph, device="cuda")
    return problem, cuda, OfflinePlanner().plan(problem, cuda, settings)


def test_a_convolution_of_few_input_channels_is_a_kernel_on_the_gpu_only(settings):
    problem = fixture("conv_few_input_channels")
    _, cpu_plan, _ = generate(problem, settings)
    assert [t.kind for t in cpu_plan.tasks if "conv2d" in t.ops] == ["gemm_epilogue"]   # oneDNN
    _, _, plan = _planned_for_the_gpu("conv_few_input_channels", settings)
    (task,) = [t for t in plan.tasks if "conv2d" in t.ops]
    assert task.kind == "reduction_fusion" and "few input channels" in task.technique
    assert "small-channel-convolution" in task.refs
    assert {"cot", "px"} <= set(task.params)
    # the prologue (relu, sub) and the epilogue up to the last relu are in the same kernel
    assert {"relu", "sub", "hardswish", "add"} <= set(task.ops)


def test_a_convolution_with_many_input_channels_stays_in_cudnn():
    from stitchcuda_lab.agents.offline.expand import node_role

    x, w = {"node": "x"}, {"node": "w"}
    for cin, role in ((16, "pool"), (32, None)):   # 16 x 3 x 3 = 144 taps, 32 x 3 x 3 = 288
        g = _graph([("c", "aten.conv2d.default", [x, w], [2, 8, 30, 30], "float32")],
                   {"x": ([2, cin, 32, 32], "float32"), "w": ([8, cin, 3, 3], "float32")})
        assert node_role(g.node("c"), g) == role, cin
        assert node_role(g.node("c"), dataclasses.replace(g, device="cpu")) is None


@pytest.mark.parametrize("variant", [{}, {"cot": 8, "px": 8}, {"cot": 32, "px": 2},
                                     {"conv": "library"}, {"conv": "library", "nhwc": True}])
def test_a_dense_convolutions_kernel_matches_eager_in_c(variant, settings):
    """The GPU's plan with C kernels: the lowering both backends share (each input channel's
    window, the weights of each output channel, prologue, epilogue) against eager, for the
    first candidate's tile and the refine round's (the C kernel has no tile; the CUDA one is
    compiled below and run on the GPU by test_each_family_matches_eager_on_cuda)."""
    from stitchcuda_lab.agents.offline import OfflineCoder

    from stitchcuda_lab.agents.offline.coder import PROGRAM

    problem, cuda, plan = _planned_for_the_gpu("conv_few_input_channels", settings)
    (task,) = [t for t in plan.tasks if "conv2d" in t.ops]
    plan.device = "cpu"
    variant = dict(variant)
    nhwc = variant.pop("nhwc", False)
    overrides = {task.id: variant} if variant else {}
    if nhwc:
        overrides[PROGRAM] = {"channels_last": True}
    cand = OfflineCoder().candidate(problem, cuda, plan, overrides)
    code = "\n".join(k.code for k in cand.kernels)
    lib = variant.get("conv") == "library"
    assert ("for (int p_c = 0; p_c < 3; ++p_c)" in code) != lib
    assert ("aten.convolution" in cand.program or "aten.conv2d" in cand.program) == lib
    assert ("memory_format=torch.channels_last" in cand.program) == nhwc
    # in the library, the convolution splits the rest: its prologue and its epilogue, each
    # a kernel; the variant's params are what the next round starts from
    assert len(cand.kernels) == (2 if lib else 1)
    assert cand.params["tasks"][task.id].get("conv") == variant.get("conv")
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, seed=seed)
        assert_close(got, want)


def test_the_refine_round_first_measures_a_dense_convolution_against_cudnn(settings):
    from stitchcuda_lab.agents.offline import OfflineCoder

    _, cuda, plan = _planned_for_the_gpu("conv_few_input_channels", settings)
    (task,) = [t for t in plan.tasks if "conv2d" in t.ops]
    base = {task.id: dict(task.params)}
    found = OfflineCoder().variants(cuda, plan, base, 1, None)
    labels = [label for label, _ in found]
    assert labels[0] == f"{task.id} convolution in cuDNN"
    # then cuDNN's channels-last (TF32: it passes where what follows averages its error away)
    assert labels[1].startswith(f"{task.id} convolution in cuDNN channels-last")
    assert found[1][1]["program"] == {"channels_last": True, "both_layouts": True,
                                         "relaid": False}
    assert f"{task.id}.px=1" in labels   # the round holds four
    after = [label for label, _ in OfflineCoder().variants(
        cuda, plan, {task.id: {**task.params, "conv": "library"}}, 1, None)]
    assert after[0] == f"{task.id} convolution fused again"
    assert f"{task.id}.block=512" in after   # then the knobs of the kernels left around it
    # a best that leaves the convolution to cuDNN NCHW measures cuDNN's other layout too
    assert any(label.startswith("convolutions channels-last") for label in after), after


def test_a_dense_tiles_epilogue_reads_its_bias_by_the_outputs_channel():
    """The epilogue's operands are indexed by the output's coordinates, not the flat index: a
    bias per channel is one load per channel (p_co0 + p_cc), with no division of p_i by the
    plane and remainder by the channels per output (0.18 of 4.0 ms on an H100's 528 million
    outputs); the output itself, laid out as the tile walks it, keeps p_i."""
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.lower import build_spec

    x, w, b = {"node": "x"}, {"node": "w"}, {"node": "b"}
    g = _graph([("c", "aten.conv2d.default", [x, w, b], [2, 10, 30, 35], "float32")],
               {"x": ([2, 8, 32, 37], "float32"), "w": ([10, 8, 3, 3], "float32"),
                "b": ([10], "float32")})
    src = emit_cuda(build_spec(g, ["c"], "k0"), {"cot": 8, "px": 4})
    epilogue = src[src.index("p_cc < 8; ++p_cc)"):]
    assert "__ldg(in2 + (p_co0 + p_cc))" in epilogue
    assert "/ 1050" not in epilogue and "% 10)" not in epilogue
    assert "out3[p_i] =" in epilogue


def test_a_dense_convolutions_cuda_tile_masks_channels_and_columns_past_the_edge():
    from stitchcuda_lab.agents.offline.backend_cuda import emit_cuda
    from stitchcuda_lab.agents.offline.launch import launch_config
    from stitchcuda_lab.agents.offline.lower import build_spec

    x, w = {"node": "x"}, {"node": "w"}
    g = _graph([("c", "aten.conv2d.default", [x, w], [2, 10, 30, 35], "float32")],
               {"x": ([2, 8, 32, 37], "float32"), "w": ([10, 8, 3, 3], "float32")})
    spec = build_spec(g, ["c"], "k0")
    src = emit_cuda(spec, {"cot": 8, "px": 4})
    assert "p_ws[576]" in src                       # 8 channels x 72 taps
    assert "if (p_co0 + p_cc >= 10) break;" in src and "if (p_ow0 + p_p >= 35) break;" in src
    # 2 x 30 rows x 9 groups of 4 columns, 128 a block; two chunks of 8 channels
    assert launch_config(spec, {"cot": 8, "px": 4})["blocks"] == 5 * 2
    assert "p_b % 2LL" in src


# dense convolutions on tensor cores (conv_tc.py): (in channels, out channels, kernel, stride,
# padding, dilation, input H x W) - 72 taps in one chunk, 32 channels a block with a tail of
# masked channels, two K chunks (16 x 3 x 3 = 144 taps), stride, dilation, a stem's 7x7
TC_SHAPES = [(8, 64, 3, 1, 0, 1, (37, 41)), (3, 10, 3, 2, 1, 1, (33, 30)),
             (16, 70, 3, 1, 1, 1, (20, 23)), (8, 48, 3, 1, 2, 2, (19, 26)),
             (3, 32, 7, 2, 3, 1, (40, 36))]


def _tc_problem(cin, cout, k, s, p, d, hw, name="tc"):
    return problem_from_source(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        f"        self.conv = nn.Conv2d({cin}, {cout}, {k}, stride={s}, padding={p}, "
        f"dilation={d})\n\n"
        "    def forward(self, x):\n        return torch.tanh(self.conv(torch.relu(x) - 0.25))\n\n"
        f"def get_inputs():\n    return [torch.randn(3, {cin}, {hw[0]}, {hw[1]})]\n\n"
        "def get_init_inputs():\n    return []\n", name=name)


def _tc_candidate(problem, settings, device: str):
    from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
    from stitchcuda_lab.graph import analyse

    graph = dataclasses.replace(analyse(problem, device=device, profile=False,
                                        settings=settings), device="cuda")
    plan = OfflinePlanner().plan(problem, graph, settings)
    (task,) = [t for t in plan.tasks if "conv2d" in t.ops]
    assert "cot" in task.params
    return OfflineCoder().candidate(problem, graph, plan, {task.id: {**task.params, "tc": True}})


@pytest.mark.parametrize("shape", TC_SHAPES)
def test_a_dense_convolution_on_tensor_cores_compiles_without_spills(shape, settings, tmp_path):
    """Each tiling's kernel to machine code: its shared memory within the static 48 KB and
    its accumulators, fragments and gathered taps in registers at three blocks an SM (a
    spill is a slow kernel, not a wrong one)."""
    cand = _tc_candidate(_tc_problem(*shape), settings, "cpu")
    (conv,) = [k for k in cand.kernels if "mma.sync" in k.code]
    assert "sc_tf32_split" in conv.code and "__launch_bounds__(128, 3)" in conv.code
    assert cuda_compile_errors({"tc": conv.code}, tmp_path, cubin=True) == ""
    if shutil.which("nvcc"):
        (tmp_path / "tc.cu").write_text(conv.code)
        out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o",
                              str(tmp_path / "tc.cubin"), str(tmp_path / "tc.cu")],
                             capture_output=True, text=True, timeout=600, check=True).stderr
        spilled = [int(b) for b in re.findall(r"(\d+) bytes spill stores", out)]
        assert spilled and max(spilled) <= 16, out   # a word or so at three blocks an SM


@pytest.mark.gpu
@pytest.mark.parametrize("shape", TC_SHAPES)
def test_a_dense_convolution_on_tensor_cores_matches_eager_on_cuda(shape, settings):
    """3xTF32 keeps fp32's accuracy: against cuDNN in fp32 arithmetic (run_both) within the
    fp32 tolerance, prologue and epilogue fused, on two draws."""
    problem = _tc_problem(*shape)
    cand = _tc_candidate(problem, settings.replace(device="cuda"), "cuda")
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, device="cuda", seed=seed)
        assert_close(got, want)


def test_the_refine_round_tries_a_dense_convolution_on_tensor_cores_after_the_simt_tiles(
        settings):
    """The tensor-core kernel lost to the SIMT tile on the GPU (67, 87, 92): it comes after
    cuDNN's kernel and the SIMT tile's shapes; from a tensor-core best, the SIMT tile is
    tried right after cuDNN's."""
    from stitchcuda_lab.agents.offline import OfflineCoder
    from stitchcuda_lab.agents.offline.coder import MAX_VARIANTS

    _, cuda, plan = _planned_for_the_gpu("conv_few_input_channels", settings)
    (task,) = [t for t in plan.tasks if "conv2d" in t.ops]
    coder = OfflineCoder()
    pool = [v for it in range(1, 8)
            for v in coder.variants(cuda, plan, {task.id: dict(task.params)}, it, None)]
    labels = [label for label, _ in pool]
    tc = labels.index(f"{task.id} convolution on tensor cores (3xTF32)")
    assert pool[tc][1][task.id]["tc"] is True
    assert labels.index(f"{task.id} convolution in cuDNN") < tc
    assert all(labels.index(f"{task.id}.{k}") < tc for k in ("px=1", "cot=32"))
    assert tc >= MAX_VARIANTS   # not in the first refine round
    # from a tensor-core best: back to the SIMT tile, and no tile knobs it would not read
    after = [label for label, _ in OfflineCoder().variants(
        cuda, plan, {task.id: {**task.params, "tc": True}}, 1, None)]
    assert after[1] == f"{task.id} convolution on the SIMT tile"
    assert not [label for label in after if ".px=" in label or ".cot=" in label], after


def test_a_tensor_core_tile_is_only_for_planes_below_two_to_the_31():
    """The pixel runs' index math is 32-bit: a plane of 2^31 outputs keeps the SIMT tile."""
    from stitchcuda_lab.agents.offline.lower import build_spec
    from stitchcuda_lab.agents.offline.pool import dense_tile

    x, w = {"node": "x"}, {"node": "w"}
    for side, tc in ((32768, False), (4096, True)):
        g = _graph([("c", "aten.conv2d.default", [x, w], [1, 8, 65536, side], "float32")],
                   {"x": ([1, 8, 65538, side + 2], "float32"), "w": ([8, 8, 3, 3], "float32")})
        tile = dense_tile(build_spec(g, ["c"], "k0"), {"tc": True})
        assert tile is not None and bool(tile.get("tc")) is tc, side


def test_a_pointwise_convolution_stays_a_gemm_in_cudnn():
    from stitchcuda_lab.agents.offline.expand import node_role

    x, w = {"node": "x"}, {"node": "w"}
    g = _graph([("c", "aten.conv2d.default", [x, w], [2, 8, 32, 32], "float32")],
               {"x": ([2, 16, 32, 32], "float32"), "w": ([8, 16, 1, 1], "float32")})
    assert node_role(g.node("c"), g) is None


def test_a_networks_stem_planned_for_the_gpu_matches_eager_in_c(settings):
    from stitchcuda_lab.agents.offline import OfflineCoder

    problem, cuda, plan = _planned_for_the_gpu("conv_few_input_channels_stem", settings)
    convs = [t for t in plan.tasks if any(o.startswith("conv2d") for o in t.ops)
             and t.kind == "reduction_fusion"]
    assert [sorted(o for o in t.ops if not o.endswith("_view")) for t in convs] == [
        ["batch_norm", "conv2d", "relu"], ["add", "conv2d_1", "conv2d_1_bias"]]
    plan.device = "cpu"
    cand = OfflineCoder().candidate(problem, cuda, plan, {})
    for seed in (0, 1):
        want, got, _, _ = run_both(problem, cand, seed=seed)
        assert_close(got, want)


def test_cudnns_other_layout_is_offered_for_a_dense_convolution_only_where_it_is_alone(settings):
    """The layout is the whole program's: with two convolutions, switching one task's to
    channels-last would switch the other's too."""
    from stitchcuda_lab.agents.offline import OfflineCoder

    _, cuda, plan = _planned_for_the_gpu("conv_few_input_channels_stem", settings)
    base = {t.id: dict(t.params) for t in plan.tasks}
    labels = [label for label, _ in OfflineCoder().variants(cuda, plan, base, 1, None)]
    assert not any("channels-last" in label for label in labels), labels
    assert sum(label.endswith("convolution in cuDNN") for label in labels) == 2, labels
