"""The offline Coder: candidates, their claims, refinement variants, fallbacks, verification."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

from stitchcuda_lab import aten
from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
from stitchcuda_lab.agents.offline.coder import KERNEL_TASKS, MAX_VARIANTS, claims
from stitchcuda_lab.agents.offline.expand import node_role
from stitchcuda_lab.agents.offline.rewrite import rewrite
from stitchcuda_lab.graph import analyse
from stitchcuda_lab.verdict import Verdict

from .conftest import assert_close, generate, load_candidate, make_problem, run_both

GEMM = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 32)
            self.ln = nn.LayerNorm(32)
        def forward(self, x, r):
            h = torch.relu(self.fc(x)) * 0.5 + r
            return self.ln(h)
    def get_inputs():
        return [torch.randn(8, 16), torch.randn(8, 32)]
    def get_init_inputs():
        return []
""", name="gemm")


def test_candidate_claims_kernels_and_keeps_the_gemm(settings):
    _graph, _plan, cand = generate(GEMM, settings)
    assert [k.lang for k in cand.kernels] == ["c"]
    assert cand.kernels[0].entry == [cand.kernels[0].name]
    assert {"aten.relu.default", "aten.layer_norm.default", "aten.native_layer_norm.default",
            "aten.mul.Tensor", "aten.add.Tensor"} <= set(cand.replaced)
    # the bias moved into the epilogue kernel: the library runs the plain mm
    assert "aten.linear.default" in cand.kept and "aten.mm.default" in cand.kept
    assert not set(cand.replaced) & set(cand.kept)
    src = cand.module_source()
    assert "runtime.load(SOURCES[name], lang=LANGS[name], name=name)" in src
    assert "torch.ops.aten.linear.default(" in src and "torch.empty(" in src
    assert "_PROBLEM_SOURCE" in src and 'ns["Model"]' not in src.split("class ModelNew")[0][-50:]
    assert cand.params["tasks"] and cand.params["variant"] == "planner defaults"


def test_a_first_candidate_of_a_plan_with_params_is_labelled_with_them(settings):
    import dataclasses

    from stitchcuda_lab.agents.offline import OfflineCoder
    graph, plan, _ = generate(GEMM, settings)
    t = next(t for t in plan.tasks if t.kind != "keep")
    edited = dataclasses.replace(plan, tasks=[dataclasses.replace(t, params={"chunk": 4096})
                                              if x is t else x for x in plan.tasks])
    cand = OfflineCoder().code(GEMM, graph, edited, settings, iteration=0)[0]
    assert cand.params["variant"] == f"the plan's params: {t.id} chunk=4096"


def test_model_new_has_the_reference_parameters_under_the_same_names(settings):
    _, _, cand = generate(GEMM, settings)
    want, got, ref, new = run_both(GEMM, cand)
    assert_close(got, want)
    assert new.state_dict().keys() == ref.state_dict().keys()
    for k, v in ref.state_dict().items():
        assert torch.equal(new.state_dict()[k], v)
    assert new.training == ref.training


def test_claims_never_replace_an_op_the_program_still_calls(settings):
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.rand(8) + 0.5)
            def forward(self, x):
                y = torch.sigmoid(x) * 2.0
                return F.rms_norm(torch.cumsum(y, -1), (8,), self.w)
        def get_inputs():
            return [torch.randn(4, 8)]
        def get_init_inputs():
            return []
    """)
    graph = analyse(p, profile=False)
    sig = [n.name for n in graph.calls() if n.target == "aten.sigmoid.default"]
    mul = [n.name for n in graph.calls() if n.target == "aten.mul.Tensor"]
    replaced, kept = claims(graph, [sig + mul])
    assert "aten.sigmoid.default" in replaced
    # rms_norm (kept here) lowers to aten.mul.Tensor on CPU, so mul cannot be claimed
    if "aten.mul.Tensor" in kept:
        assert "aten.mul.Tensor" not in replaced


def test_refine_proposes_at_most_four_distinct_variants(settings):
    graph = dataclasses.replace(analyse(GEMM, profile=False), device="cuda")
    plan = OfflinePlanner().plan(GEMM, graph, settings)
    cand = OfflineCoder().code(GEMM, graph, plan, settings, iteration=0)[0]
    ok = Verdict(status="pass", timings={"ours": 1.0, "eager": 1.2})
    seen = set()
    for it in (1, 2):
        vs = OfflineCoder().code(GEMM, graph, plan, settings, iteration=it, previous=cand,
                                 feedback=ok)
        assert 1 <= len(vs) <= MAX_VARIANTS
        for v in vs:
            assert v.iteration == it and v.parent == cand.id and v.params["variant"]
            assert v.digest() != cand.digest()
            seen.add(v.params["variant"])
    assert len(seen) >= 6
    assert any("block=" in x for x in seen) and any("rows=" in x for x in seen)


def test_refine_after_failure_offers_scalar_and_library_variants(settings):
    graph, plan, cand = generate(GEMM, settings)
    bad = Verdict(status="incorrect", reason="mismatch")
    vs = OfflineCoder().code(GEMM, graph, plan, settings, iteration=1, previous=cand,
                             feedback=bad)
    labels = [v.params["variant"] for v in vs]
    assert any("library" in x for x in labels)
    lib = next(v for v in vs if "library" in v.params["variant"])
    assert len(lib.kernels) < max(1, len(cand.kernels)) or not lib.kernels
    want, got, _, _ = run_both(GEMM, lib)
    assert_close(got, want)


def test_variant_that_splits_a_group_is_still_correct(settings):
    graph, plan, _cand = generate(GEMM, settings)
    tid = plan.tasks[0].id
    c = OfflineCoder().candidate(GEMM, graph, plan, {tid: {"off": True}}, iteration=1)
    assert all(not k.name.endswith(tid) for k in c.kernels)
    want, got, _, _ = run_both(GEMM, c)
    assert_close(got, want)


def test_skipped_task_is_left_to_the_library(settings):
    graph, plan, cand = generate(GEMM, settings)
    plan.tasks[0].status = "skipped"
    c = OfflineCoder().code(GEMM, graph, plan, settings, iteration=0)[0]
    assert len(c.kernels) == len(cand.kernels) - 1
    want, got, _, _ = run_both(GEMM, c)
    assert_close(got, want)


DEEP = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(32, 32),
                                                                     nn.LayerNorm(32))])
        def forward(self, x):
            return torch.tanh(self.net(x))
    def get_inputs():
        return [torch.randn(8, 32)]
    def get_init_inputs():
        return []
""", name="deep")


def test_cuda_plan_emits_cuda_kernels_and_a_graphed_forward(settings):
    # four GEMMs, each with its normalisation: launches a replay saves, on tiny inputs
    graph = dataclasses.replace(analyse(DEEP, profile=False), device="cuda", eager_ms=0.05,
                                eager_launches=12)
    plan = OfflinePlanner().plan(DEEP, graph, settings)
    assert plan.tasks[-1].kind == "cuda_graph", plan.notes
    cand = OfflineCoder().code(DEEP, graph, plan, settings, iteration=0)[0]
    assert {k.lang for k in cand.kernels} == {"cuda"}
    assert all('extern "C" __global__' in k.code for k in cand.kernels)
    src = cand.module_source()
    assert "torch.cuda.CUDAGraph()" in src and "graph.replay()" in src and ".clone()" in src
    assert "_GRID" in src and ".launch(" in src
    compile(src, "<candidate>", "exec")


def test_uncaptured_problem_gets_an_honest_unchanged_forward(settings):
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(5, 5)
            def forward(self, x):
                return self.fc(x) * 2 if x.sum().item() > 0 else self.fc(x) - 1
        def get_inputs():
            return [torch.randn(3, 5)]
        def get_init_inputs():
            return []
    """)
    graph, _plan, cand = generate(p, settings)
    assert graph.capture == "none" and cand.kernels == [] and cand.replaced == []
    assert "capture failed" in cand.notes
    want, got, _, _ = run_both(p, cand)
    assert_close(got, want)


def test_worker_verifies_the_first_candidate(settings, judge):
    _, _, cand = generate(GEMM, settings)
    verdict = judge(GEMM, cand)
    assert verdict.status == "pass", verdict.reason
    assert verdict.correct


@pytest.mark.gpu
def test_cuda_candidate_with_graph_capture_matches_eager(settings):
    settings = settings.replace(device="cuda")
    graph = analyse(GEMM, device="cuda", profile=True)
    graph = dataclasses.replace(graph, eager_ms=0.001)       # force the CUDA-graph task
    plan = OfflinePlanner().plan(GEMM, graph, settings)
    cand = OfflineCoder().code(GEMM, graph, plan, settings, iteration=0)[0]
    for seed in (0, 1, 2):
        want, got, _, _ = run_both(GEMM, cand, device="cuda", seed=seed)
        assert_close(got, want)


# --- fp32 GEMMs on tensor cores (tensor_core_gemm) -------------------------------------------

BIG_LINEAR = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1024, 2048)
        def forward(self, x):
            return torch.relu(self.fc(x))
    def get_inputs():
        return [torch.randn(2048, 1024)]
    def get_init_inputs():
        return []
""", name="big_linear")


def _cuda_plan(problem, settings):
    graph = analyse(problem, device="cpu", profile=False, settings=settings)
    graph = dataclasses.replace(graph, device="cuda")      # planned as for a GPU
    return graph, OfflinePlanner().plan(problem, graph, settings)


def test_split_gemm_program_calls_runtime_gemm_and_claims_the_gemm(settings):
    graph, plan = _cuda_plan(BIG_LINEAR, settings)
    (task,) = [t for t in plan.tasks if t.kind == "tensor_core_gemm"]
    cand = OfflineCoder().candidate(BIG_LINEAR, graph, plan, {})
    assert "runtime.gemm.linear(" in cand.program
    assert "torch.ops.aten.linear" not in cand.program
    assert {"aten.linear.default", "aten.mm.default"} <= set(cand.replaced)
    assert "aten.linear.default" not in cand.kept
    # the same program with the task off keeps the library GEMM and says so
    off = OfflineCoder().candidate(BIG_LINEAR, graph, plan, {task.id: {"off": True}})
    assert "runtime.gemm" not in off.program and "torch.ops.aten.linear" in off.program
    assert "aten.linear.default" in off.kept and "aten.linear.default" not in off.replaced
    # skipping the task in the plan does the same
    task.status = "skipped"
    skipped = OfflineCoder().candidate(BIG_LINEAR, graph, plan, {})
    assert "runtime.gemm" not in skipped.program


def test_refinement_measures_the_split_against_fp32_cublas_first(settings):
    graph, plan = _cuda_plan(BIG_LINEAR, settings)
    (task,) = [t for t in plan.tasks if t.kind == "tensor_core_gemm"]
    first = OfflineCoder().code(BIG_LINEAR, graph, plan, settings, iteration=0)[0]
    nxt = OfflineCoder().code(BIG_LINEAR, graph, plan, settings, iteration=1, previous=first,
                              feedback=Verdict(status="pass", correct=True))
    assert nxt[0].params["tasks"][task.id]["off"] is True
    assert "fp32 cuBLAS" in nxt[0].params["variant"]
    # after a failed verdict the split is among the first things taken back
    failed = OfflineCoder().variants(graph, plan, {}, 1, Verdict(status="incorrect"))
    assert any(label.startswith(f"{task.id} in the library") for label, _ in failed)


TALL_SKINNY = make_problem("""
    class Model(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)
    def get_inputs():
        return [torch.rand(16384, 32), torch.rand(32, 16384)]
    def get_init_inputs():
        return []
""", name="tall_skinny")


def test_a_short_k_gemm_is_timed_on_tensor_cores_in_the_refine_round(settings):
    """K = 32 over a 1 GB output: the first candidate keeps fp32 cuBLAS (the split measured
    slower at K = 128 elsewhere), the refine round's variant is the split."""
    graph, plan = _cuda_plan(TALL_SKINNY, settings)
    (task,) = [t for t in plan.tasks if t.kind == "tensor_core_gemm"]
    first = OfflineCoder().code(TALL_SKINNY, graph, plan, settings, iteration=0)[0]
    assert "runtime.gemm" not in first.program and first.params["tasks"][task.id]["off"]
    nxt = OfflineCoder().code(TALL_SKINNY, graph, plan, settings, iteration=1, previous=first,
                              feedback=Verdict(status="pass", correct=True))
    assert nxt[0].params["variant"] == f"{task.id} GEMMs on tensor cores"
    assert "runtime.gemm.matmul(" in nxt[0].program or "runtime.gemm.mm(" in nxt[0].program
    # and back again from a best that took it
    back = OfflineCoder().variants(graph, plan, nxt[0].params["tasks"], 2, None)
    assert back[0][0] == f"{task.id} GEMMs in fp32 cuBLAS"


def test_a_long_scan_first_refines_how_many_elements_a_thread_scans(settings):
    """A block-per-row scan starts one element a thread per chunk (the kernel verified the
    longest); the refine round's first variant gives each thread four in a row, the next
    after that eight."""
    masked = make_problem("""
        class Model(nn.Module):
            def forward(self, x, mask):
                return torch.cumsum(x * mask, dim=1)
        def get_inputs():
            x = torch.rand(4, 3000)
            return [x, torch.randint(0, 2, x.shape).bool()]
        def get_init_inputs():
            return []
    """)
    graph, plan = _cuda_plan(masked, settings)
    first = OfflineCoder().code(masked, graph, plan, settings, iteration=0)[0]
    (tid,) = first.params["tasks"]
    assert first.params["tasks"][tid]["ipt"] == 1 and "cache" not in first.params["tasks"][tid]
    ok = Verdict(status="pass", correct=True, timings={"ours": 1.0, "eager": 2.0})
    nxt = OfflineCoder().code(masked, graph, plan, settings, iteration=1, previous=first,
                              feedback=ok)
    assert nxt[0].params["variant"] == f"{tid}.ipt=4"
    assert "xs[k] = live ?" in "\n".join(k.code for k in nxt[0].kernels)
    # nothing the scan's kernel ignores (its rows strategy, float4), in any refine round
    labels = [label for it in range(1, 5) for label, _ in
              OfflineCoder().variants(graph, plan, first.params["tasks"], it, ok)]
    assert labels and not any(x in v for v in labels for x in (".rows=", ".vec=", ".ipt=1"))
    again = OfflineCoder().variants(graph, plan, nxt[0].params["tasks"], 1, ok)
    assert again[0][0] == f"{tid}.ipt=8"


def test_rubric_does_not_call_runtime_gemm_a_torch_fallback(settings):
    from stitchcuda_lab.agents import rubric
    graph, plan = _cuda_plan(BIG_LINEAR, settings)
    cand = OfflineCoder().candidate(BIG_LINEAR, graph, plan, {})
    scores = rubric.score(cand, Verdict(status="pass", correct=True))
    assert scores["compliance"]["score"] == 1.0, scores["compliance"]
    # while a program that calls torch's linear for a claimed op is still caught
    bad = dataclasses.replace(cand, program=cand.program.replace(
        "runtime.gemm.linear(", "torch.nn.functional.linear("))
    assert rubric.score(bad, Verdict(status="pass", correct=True))["compliance"]["score"] < 1.0


@pytest.mark.gpu
def test_split_gemm_candidate_matches_eager_on_cuda(settings):
    settings = settings.replace(device="cuda")
    graph = analyse(BIG_LINEAR, device="cuda", profile=True)
    plan = OfflinePlanner().plan(BIG_LINEAR, graph, settings)
    assert "tensor_core_gemm" in [t.kind for t in plan.tasks]
    cand = OfflineCoder().code(BIG_LINEAR, graph, plan, settings, iteration=0)[0]
    assert "runtime.gemm.linear(" in cand.program
    for seed in (0, 1):
        want, got, _, _ = run_both(BIG_LINEAR, cand, device="cuda", seed=seed)
        assert_close(got, want)


@pytest.mark.gpu
def test_a_short_k_split_matches_eager_on_cuda(settings):
    """The refine round's split of a K = 32 product (TALL_SKINNY) within fp32's tolerance."""
    settings = settings.replace(device="cuda")
    graph = analyse(TALL_SKINNY, device="cuda", profile=True)
    plan = OfflinePlanner().plan(TALL_SKINNY, graph, settings)
    (task,) = [t for t in plan.tasks if t.kind == "tensor_core_gemm"]
    cand = OfflineCoder().candidate(TALL_SKINNY, graph, plan, {task.id: {"off": False}})
    assert "runtime.gemm" in cand.program
    for seed in (0, 1):
        want, got, _, _ = run_both(TALL_SKINNY, cand, device="cuda", seed=seed)
        assert_close(got, want)


# --- the claims and the Verifier's op policy agree ------------------------------------------

CONV_BN = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)
        def forward(self, x):
            return F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
    def get_inputs():
        return [torch.randn(2, 3, 10, 10)]
    def get_init_inputs():
        return []
""", name="conv_bn")
EINSUM = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 8))
        def forward(self, x):
            return torch.relu(torch.einsum("bi,ij->bj", x, self.w)) * 2.0
    def get_inputs():
        return [torch.randn(4, 16)]
    def get_init_inputs():
        return []
""", name="einsum")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", ["gemm", "conv_bn", "einsum", "big_linear"])
def test_claims_follow_the_verifiers_op_classes(name, device, settings):
    problem = {"gemm": GEMM, "conv_bn": CONV_BN, "einsum": EINSUM, "big_linear": BIG_LINEAR}[name]
    graph = analyse(problem, device="cpu", profile=False, settings=settings)
    graph = dataclasses.replace(graph, device=device)
    plan = OfflinePlanner().plan(problem, graph, settings)
    cand = OfflineCoder().code(problem, graph, plan, settings, iteration=0)[0]
    g = rewrite(graph)   # the graph the plan's node names refer to
    split_nodes = [g.node(o) for t in plan.tasks if t.kind == "tensor_core_gemm" for o in t.ops]
    split = {op for n in split_nodes for op in (n.target, *n.lowers_to)}
    # kernels replace compute ops, and the convolutions a window kernel computes (a depthwise
    # one, or on the GPU one of few input channels: pool.py); runtime.gemm replaces library
    # GEMMs
    assert cand.replaced
    windows = {op for t in plan.tasks if t.kind in KERNEL_TASKS for o in t.ops
               if node_role(g.node(o), g) == "pool" and aten.library_family(g.node(o).target)
               for op in (g.node(o).target, *g.node(o).lowers_to)}
    assert bool(windows) == (name == "conv_bn" and device == "cuda")   # 3 input channels
    for op in cand.replaced:
        assert aten.op_class(op) == ("library" if op in split | windows else "compute"), op
    # what an epilogue task leaves to the vendor library is a library op, kept (or split)
    for t in plan.tasks:
        if t.kind == "gemm_epilogue":
            libs = [g.node(o) for o in t.ops if node_role(g.node(o)) is None]
            assert libs
            for n in libs:
                assert aten.op_class(n.target) == "library", n.target
                assert n.target in cand.kept or n in split_nodes


@pytest.mark.parametrize("problem", [CONV_BN, EINSUM], ids=["conv_bn", "einsum"])
def test_the_verifiers_policy_accepts_what_the_candidate_runs(problem, settings):
    from stitchcuda_lab.verifier.antihack import find_fallback, make_tracer

    _, _, cand = generate(problem, settings)
    mod = load_candidate(cand, problem.name)
    ns = problem.namespace()
    torch.manual_seed(42)
    ref = ns["Model"]()
    torch.manual_seed(42)
    new = mod.ModelNew()
    inputs = problem.make_inputs(seed=0)
    with torch.no_grad(), make_tracer() as traced_ref:
        ref(*[x.clone() for x in inputs])
    with torch.no_grad(), make_tracer() as traced_new:
        new(*[x.clone() for x in inputs])
    assert find_fallback(traced_new.counts, replaced=cand.replaced, kept=cand.kept,
                         reference_ops=traced_ref.counts) == []
    # and it would catch a claimed op that still ran through torch
    ran = sorted(t for t in traced_new.counts if aten.op_class(t) != "cheap")
    assert find_fallback(traced_new.counts, replaced=[*cand.replaced, ran[0]], kept=[],
                         reference_ops=traced_ref.counts)


CONV_NET = make_problem("""
    import torch.nn.functional as F
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.scale = nn.Parameter(torch.randn(8, 1, 1))
            self.fc = nn.Linear(8 * 4 * 4, 10)
        def forward(self, x):
            y = torch.relu(self.conv(x)) * 2.0 - 0.5
            y = torch.relu(self.conv2(y))
            y = F.max_pool2d(y, 2) * self.scale
            return self.fc(torch.flatten(y, 1))
    def get_inputs():
        return [torch.randn(2, 3, 8, 8)]
    def get_init_inputs():
        return []
""", name="conv_net")

CONV3D = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(4, 6, 3)
            self.bias = nn.Parameter(torch.randn(6, 1, 1, 1))
        def forward(self, x):
            return torch.tanh(self.conv(x) + self.bias).sum(dim=2)
    def get_inputs():
        return [torch.randn(2, 4, 6, 7, 8)]
    def get_init_inputs():
        return []
""", name="conv3d")


CONV_VIEW = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.fc = nn.Linear(4 * 6 * 6, 5)
        def forward(self, x):
            return torch.sigmoid(self.fc(self.conv(x).view(x.shape[0], -1))) * 3.0
    def get_inputs():
        return [torch.randn(2, 3, 8, 8)]
    def get_init_inputs():
        return []
""", name="conv_view")


@pytest.mark.parametrize("problem,fmt", [(CONV_NET, "channels_last"),
                                         (CONV3D, "channels_last_3d"),
                                         (CONV_VIEW, "channels_last")],
                         ids=["2d", "3d", "view-of-a-convolution"])
def test_refine_tries_convolutions_channels_last_and_they_match_eager(problem, fmt, settings):
    """torch.compile runs convolutions channels-last; the refine step measures the same
    layout. Tensors that may be channels-last are made contiguous before views (flatten) and
    before kernels whose index arithmetic assumes the traced layout (per-channel broadcasts)."""
    graph, plan, cand = generate(problem, settings)
    ok = Verdict(status="pass", timings={"ours": 1.0, "eager": 1.2})
    vs = OfflineCoder().code(problem, graph, plan, settings, iteration=1, previous=cand,
                             feedback=ok)
    nhwc = next(v for v in vs if "channels-last" in v.params["variant"])
    src = nhwc.module_source()
    assert f"memory_format=torch.{fmt}" in src and f"memory_format=torch.{fmt}" not in \
        cand.module_source()
    model = load_candidate(nhwc).ModelNew()
    weights = [p for n, p in model.named_parameters() if n.startswith("conv") and p.dim() > 3]
    assert weights and all(p.is_contiguous(memory_format=getattr(torch, fmt)) for p in weights)
    want, got, _, _ = run_both(problem, nhwc)
    assert_close(got, want)
    back = OfflineCoder().code(problem, graph, plan, settings, iteration=2, previous=nhwc,
                               feedback=ok)          # the layout carries into later variants
    assert back and all(f"memory_format=torch.{fmt}" in v.module_source() for v in back)


def test_channels_last_candidate_passes_the_verifier(settings, judge):
    graph, plan, cand = generate(CONV_NET, settings)
    nhwc = OfflineCoder().candidate(CONV_NET, graph, plan,
                                    {"program": {"channels_last": True}}, iteration=1)
    assert "channels_last" in nhwc.module_source() and nhwc.kernels
    verdict = judge(CONV_NET, nhwc)
    assert verdict.status == "pass", verdict.reason


def test_a_weight_stored_channels_last_reads_right_elsewhere(settings):
    """A convolution's weight that the model also reads itself (a per-element function of it
    fused into a kernel, a view of it) is made contiguous for those readers."""
    problem = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
            def forward(self, x):
                w = self.conv.weight
                return torch.relu(self.conv(x)).sum() + (w * w + 1.0).sum() + w.view(-1)[5]
        def get_inputs():
            return [torch.randn(2, 3, 8, 8)]
        def get_init_inputs():
            return []
    """, name="weight_read_twice")
    graph, plan, _ = generate(problem, settings)
    nhwc = OfflineCoder().candidate(problem, graph, plan, {"program": {"channels_last": True}},
                                    iteration=1)
    assert "channels_last" in nhwc.module_source()
    want, got, _, _ = run_both(problem, nhwc)
    assert_close(got, want)


CONV_T = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(4, 6, 3, stride=2)
        def forward(self, x):
            return torch.tanh(self.up(x) - 0.5)
    def get_inputs():
        return [torch.randn(2, 4, 6, 6)]
    def get_init_inputs():
        return []
""", name="conv_t")

CONV_T_POOL = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(4, 6, 3, stride=2)
        def forward(self, x):
            return torch.tanh(torch.nn.functional.max_pool2d(self.up(x), 2)).mean(dim=(2, 3))
    def get_inputs():
        return [torch.randn(2, 4, 6, 6)]
    def get_init_inputs():
        return []
""", name="conv_t_pool")

DEPTHWISE = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.dw = nn.Conv2d(8, 16, 3, padding=1, groups=8)   # two outputs per channel
        def forward(self, x):
            return torch.relu(self.dw(x))
    def get_inputs():
        return [torch.randn(2, 8, 6, 6)]
    def get_init_inputs():
        return []
""", name="depthwise")


@pytest.mark.parametrize("problem,first", [(CONV_NET, False), (CONV3D, False), (CONV_T, True),
                                           (CONV_T_POOL, False), (DEPTHWISE, True)],
                         ids=["2d", "3d", "transposed", "transposed-pool", "depthwise"])
def test_on_the_gpu_transposed_and_depthwise_convolutions_start_channels_last(
        problem, first, settings):
    """Channels-last gives the reference's own bits faster only for 2-d transposed (TF32 NHWC in
    cuDNN either way) and depthwise convolutions with a channel multiplier (one output channel
    per group is a kernel's): those start channels-last on the GPU, the rest
    NCHW (a plain fp32 convolution would become TF32, 5x the tolerance away). A transposed
    one followed by a pool or a reduction starts NCHW: those kernels read NCHW, and the copy
    cost more than the layout gained on the H200. The first refine round measures the other
    layout. The CPU keeps NCHW first."""
    from stitchcuda_lab.agents.offline.coder import PROGRAM, default_channels_last
    from stitchcuda_lab.agents.offline.rewrite import rewrite
    graph, plan, _ = generate(problem, settings)
    assert default_channels_last(rewrite(graph), "cuda") is first
    assert default_channels_last(rewrite(graph), "c") is False
    plan.device = "cuda"
    vs = OfflineCoder().variants(graph, plan, {PROGRAM: {"channels_last": first}}, 1,
                                 Verdict(status="pass", timings={"ours": 1.0, "eager": 1.2}))
    label, params = vs[0]
    assert params[PROGRAM] == {"channels_last": not first, "both_layouts": True,
                               "relaid": False}   # the flipped program re-lays its knobs
    assert label.startswith("convolutions NCHW" if first else "convolutions channels-last")


def test_a_failed_channels_last_program_is_answered_with_nchw_first(settings):
    from stitchcuda_lab.agents.offline.coder import PROGRAM
    graph, plan, _ = generate(CONV_T, settings)
    plan.device = "cuda"
    failed = Verdict(status="incorrect", reason="output_mismatch")
    vs = OfflineCoder().variants(graph, plan, {PROGRAM: {"channels_last": True}}, 1, failed)
    label, params = vs[0]
    assert label.startswith("convolutions NCHW") and params[PROGRAM]["channels_last"] is False
    # and the NCHW program does not say it runs channels-last
    nchw = OfflineCoder().candidate(CONV_T, graph, plan, params, iteration=1)
    assert "convolutions run channels-last" not in nchw.notes
    assert nchw.params["tasks"][PROGRAM]["channels_last"] is False


def test_ops_a_kept_op_runs_inside_itself_are_not_claimed_replaced(settings):
    """PyTorch's CPU logsumexp calls add inside its own kernel: the eager profile records that
    (the replay sees only logsumexp), so a fused bias add is not claimed as replaced, and the
    Verifier's trace of the kept logsumexp's add is no fallback."""
    from stitchcuda_lab.agents.offline.coder import claims
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(32, 16)
            def forward(self, x):
                return torch.logsumexp(torch.relu(self.fc(x)), dim=1, keepdim=True)
        def get_inputs():
            return [torch.randn(8, 32)]
        def get_init_inputs():
            return []
    """, name="lse_kept")
    graph = analyse(p, device="cpu", profile=True, settings=settings)
    lse = next(n for n in graph.calls() if n.opname == "logsumexp")
    assert "add" in {aten.norm(o) for o in lse.lowers_to}
    g = rewrite(graph)
    fused = [n.name for n in g.calls() if n.opname in ("add", "relu")]
    replaced, kept = claims(g, [fused])
    assert "aten.relu.default" in replaced and not any("add" in r for r in replaced)


def test_saved_parameters_without_a_layout_rebuild_nchw(settings):
    """The channels-last default is the first candidate's; task parameters saved without a
    layout (a session from before the default, a variant of an NCHW parent) rebuild NCHW."""
    graph, plan, _ = generate(CONV_T, settings)
    plan.device = "cuda"
    coder = OfflineCoder()
    first = coder.candidate(CONV_T, graph, plan, {})
    assert "memory_format=torch.channels_last" in first.module_source()
    tid = next(t.id for t in plan.tasks if t.kind in ("pointwise_fusion", "gemm_epilogue"))
    old = coder.candidate(CONV_T, graph, plan, {tid: {"block": 256}}, iteration=1)
    assert "memory_format=torch.channels_last" not in old.module_source()


MANY_LAUNCHES = make_problem("""
    class Model(nn.Module):
        def forward(self, x):
            for _ in range(30):
                x = torch.tanh(x * 1.01 + 0.1)
            return x
    def get_inputs():
        return [torch.randn(4, 32)]
    def get_init_inputs():
        return []
""", name="many_launches")


def test_a_deep_forward_on_the_gpu_is_also_tried_as_its_own_ops_in_a_cuda_graph(settings):
    """Where a network's result hangs on every rounding (training-mode batch norm over two
    values, a hundred TF32 convolutions: KernelBench's EfficientNetB2 and ResNet101), no fused
    program agrees with the reference to 1e-4, and a CUDA graph alone is most of the gain. A
    forward of many launches gets that variant after a failure and in its refine pool; the
    variant is the problem's own forward replayed, with nothing left to vary."""
    from stitchcuda_lab.agents.offline.coder import AS_IS, PROGRAM
    graph, plan, first = generate(MANY_LAUNCHES, settings)
    plan.device = "cuda"
    coder = OfflineCoder()
    failed = coder.variants(graph, plan, dict(first.params["tasks"]), 1,
                            Verdict(status="incorrect", reason="output_mismatch"))
    assert failed[0][0].startswith("every op in PyTorch") and failed[0][1] == {PROGRAM: {AS_IS: True}}
    passed = coder.variants(graph, plan, dict(first.params["tasks"]), 1,
                            Verdict(status="pass", timings={"ours": 1.0, "eager": 1.2}))
    assert passed[0][1] == {PROGRAM: {AS_IS: True}}
    # and beside the planner's program from the first iteration: a bench that cuts the refine
    # round short must not have left it untried
    both = coder.code(MANY_LAUNCHES, graph, plan, settings, iteration=0)
    assert [c.params["tasks"].get(PROGRAM, {}).get(AS_IS, False) for c in both] == [False, True]
    assert both[1].params["variant"].startswith("every op in PyTorch")
    # once it has a verdict, a refine round spends no slot on it again
    from stitchcuda_lab.loop import Attempt
    tried = [Attempt(iteration=0, candidate=c, verdict=Verdict(status="pass")) for c in both]
    after = coder.code(MANY_LAUNCHES, graph, plan, settings, iteration=1, previous=both[0],
                       feedback=Verdict(status="pass"), attempts=tried)
    assert after and not any(c.params["tasks"].get(PROGRAM, {}).get(AS_IS) for c in after)
    again = coder.code(MANY_LAUNCHES, graph, plan, settings, iteration=1, previous=both[0],
                       feedback=Verdict(status="pass"), attempts=tried[:1])
    assert again[0].params["tasks"].get(PROGRAM, {}).get(AS_IS)
    as_is = coder.candidate(MANY_LAUNCHES, graph, plan, {PROGRAM: {AS_IS: True}}, iteration=1)
    assert not as_is.kernels and not as_is.replaced and as_is.params["cuda_graph"] is True
    assert "_graphed(self, super().forward, args)" in as_is.program
    assert coder.code(MANY_LAUNCHES, graph, plan, settings, iteration=2, previous=as_is,
                      feedback=Verdict(status="pass")) == []
    assert "no kernel of its own" in coder.why_empty
    # a failed one (a forward a graph cannot hold) hands the search back to the planner's
    again = coder.code(MANY_LAUNCHES, graph, plan, settings, iteration=2, previous=as_is,
                       feedback=Verdict(status="runtime_error", reason="cuda_error"))
    assert again and all(not c.params["tasks"].get(PROGRAM, {}).get(AS_IS) for c in again)
    # on the CPU (no graph to gain) and for a short forward, no such variant
    plan.device = "cpu"
    assert len(coder.code(MANY_LAUNCHES, graph, plan, settings, iteration=0)) == 1
    assert all(AS_IS not in p.get(PROGRAM, {}) for _, p in coder.variants(
        graph, plan, dict(first.params["tasks"]), 1, Verdict(status="incorrect")))
    noisy = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                for _ in range(30):
                    x = torch.tanh(x * 1.01 + 0.1)
                return F.dropout(x, 0.1, training=True)
        def get_inputs():
            return [torch.randn(4, 32)]
        def get_init_inputs():
            return []
    """)
    g3, p3, c3 = generate(noisy, settings)
    p3.device = "cuda"
    assert all(AS_IS not in p.get(PROGRAM, {}) for _, p in coder.variants(
        g3, p3, dict(c3.params["tasks"]), 1, Verdict(status="incorrect")))
    # a dropout of p = 0 draws nothing (KernelBench's GoogleNet carries one): the graph may
    from stitchcuda_lab.problem import problem_from_source
    quiet = problem_from_source(noisy.source.replace("F.dropout(x, 0.1,", "F.dropout(x, 0.0,"),
                                name="quiet")
    assert quiet.source != noisy.source
    g4, p4, c4 = generate(quiet, settings)
    p4.device = "cuda"
    assert any(AS_IS in p.get(PROGRAM, {}) for _, p in coder.variants(
        g4, p4, dict(c4.params["tasks"]), 1, Verdict(status="incorrect")))
    g2, p2, c2 = generate(CONV_T, settings)
    p2.device = "cuda"
    assert all(AS_IS not in p.get(PROGRAM, {}) for _, p in coder.variants(
        g2, p2, dict(c2.params["tasks"]), 1, Verdict(status="incorrect")))


def test_a_deep_forwards_cuda_graph_goes_before_the_knobs_that_pay_most(settings):
    """The knobs put at the head of the refine pool (a row kept in registers) go after the
    problem's own forward in a CUDA graph, not before it: with a hundred row kernels
    (ResNet101's batch norms) they filled the four slots of the first refine round and the
    graph came twelfth."""
    from stitchcuda_lab.agents.offline.coder import AS_IS, PROGRAM
    deep = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                for _ in range(24):
                    x = F.layer_norm(x, (4096,)) * 1.01 + x
                return x
        def get_inputs():
            return [torch.randn(32, 4096)]
        def get_init_inputs():
            return []
    """, name="deep_norms")
    graph = dataclasses.replace(analyse(deep, device="cpu", profile=False, settings=settings),
                                device="cuda")
    plan = OfflinePlanner().plan(deep, graph, settings)
    first = OfflineCoder().code(deep, graph, plan, settings, iteration=0)[0]
    assert any(p.get("cache") for p in first.params["tasks"].values())   # a knob put first
    labels = OfflineCoder().variants(graph, plan, dict(first.params["tasks"]), 1,
                                     Verdict(status="pass", timings={"ours": 1.0, "eager": 1.2}))
    assert labels[0][1] == {PROGRAM: {AS_IS: True}}
    assert ".cache=" in labels[1][0]


def _one_convolution(conv: str, forward: str, shape: str):
    """A problem of one ``self.conv = conv`` returning ``forward`` of input ``randn(shape)``."""
    return make_problem(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = {conv}
            def forward(self, x):
                return {forward}
        def get_inputs():
            return [torch.randn({shape})]
        def get_init_inputs():
            return []
    """)


@pytest.mark.parametrize("conv,flip_first", [("nn.ConvTranspose2d(4, 8, 3, stride=2)", True),
                                             ("nn.Conv2d(4, 8, 1)", False),
                                             ("nn.Conv2d(24, 8, 1)", True)],
                         ids=["transposed", "plain", "plain-of-many-channels"])
def test_a_transposed_convolutions_other_layout_is_refined_before_a_kernels_row_cache(
        conv, flip_first, settings):
    """A refine round cut short reaches its first variants only. A transposed convolution
    gives the reference's bits in either layout, channels-last faster: that is measured
    first; so does a plain one of more than 16 input channels (TF32 in either layout). One
    of few channels may run in exact fp32 NCHW, where channels-last fails the check: the
    row kernel's register cache goes first there."""
    cin = conv.split("(")[1].split(",")[0]
    # rows a block reads
    problem = _one_convolution(conv, "torch.softmax(self.conv(x), dim=-1)", f"2, {cin}, 3, 1100")
    graph, plan = _cuda_plan(problem, settings)
    first = OfflineCoder().code(problem, graph, plan, settings, iteration=0)[0]
    ok = Verdict(status="pass", correct=True, timings={"ours": 1.0, "eager": 2.0})
    labels = [label for label, _ in
              OfflineCoder().variants(graph, plan, first.params["tasks"], 1, ok)]
    flip = next(i for i, v in enumerate(labels) if v.startswith("convolutions "))
    cache = next(i for i, v in enumerate(labels) if ".cache=" in v)
    assert (flip < cache) is flip_first, labels


TWO_EPILOGUES = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(32, 32), nn.Linear(32, 32)
        def forward(self, x):
            x = torch.relu(F.layer_norm(self.a(x), (32,)))
            return torch.sigmoid(F.layer_norm(self.b(x), (32,)) * 2)
    def get_inputs():
        return [torch.randn(16, 32)]
    def get_init_inputs():
        return []
""", name="two_epilogues")


def test_a_program_of_many_kernels_builds_them_in_groups(settings, monkeypatch):
    """Past ``program.MODULES`` kernels a program loads them in shared builds
    (``runtime.load_group``): ResNet101's 103 fused layers, one build each, ran into the
    Verifier's limit of 64 builds a candidate. The person still reads and edits one source per
    kernel, and the rubric still sees every kernel loaded."""
    from stitchcuda_lab.agents import rubric
    from stitchcuda_lab.agents.offline import program
    _, _, alone = generate(TWO_EPILOGUES, settings)
    assert len(alone.kernels) == 2 and "_GROUPS" not in alone.program
    monkeypatch.setattr(program, "MODULES", 1)
    _, _, cand = generate(TWO_EPILOGUES, settings)
    assert [k.code for k in cand.kernels] == [k.code for k in alone.kernels]
    assert "runtime.load_group(SOURCES, group" in cand.program
    want, got, _, new = run_both(TWO_EPILOGUES, cand)
    assert_close(got, want)
    mod = sys.modules[type(new).__module__]
    assert len({id(m) for m in mod._K.values()}) == 1 and set(mod._K) == {
        k.name for k in cand.kernels}
    assert rubric._Source(cand.module_source()).loaded >= {k.name for k in cand.kernels}


@pytest.mark.parametrize("conv,offered", [
    ("nn.ConvTranspose3d(6, 4, 3, stride=2, padding=1)", True),
    ("nn.Conv3d(6, 4, 3)", False)], ids=["transposed", "plain-3d"])
def test_a_lone_convolution_is_refined_in_the_other_layout(conv, offered, settings):
    """A program with no kernel of ours (KernelBench level 1's lone convolutions kept the
    reference) still has one variant on the GPU: its convolution in cuDNN's channels-last,
    where cuDNN runs it on TF32 tensor cores either way; a plain 3-d one ran slower so. The
    program is PyTorch's own op on channels-last tensors, and gives eager's values."""
    problem = _one_convolution(conv, "self.conv(x)", "2, 6, 4, 5, 6")
    graph = dataclasses.replace(analyse(problem, profile=False), device="cuda")
    plan = OfflinePlanner().plan(problem, graph, settings)
    first = OfflineCoder().code(problem, graph, plan, settings, iteration=0)[0]
    assert not first.kernels
    ok = Verdict(status="pass", correct=True, timings={"ours": 1.0, "eager": 1.0})
    vs = OfflineCoder().code(problem, graph, plan, settings, iteration=1, previous=first,
                             feedback=ok)
    assert bool(vs) is offered
    if offered:
        cand = vs[0]
        assert cand.params["tasks"]["program"]["channels_last"] is True
        assert "memory_format=torch.channels_last_3d" in cand.module_source()
        want, got, _, _ = run_both(problem, cand)
        assert_close(got, want)
        again = OfflineCoder().code(problem, graph, plan, settings, iteration=2,
                                    previous=cand, feedback=ok)
        assert not again   # measured once
