"""The offline Planner's decisions on small examples."""

from __future__ import annotations

import dataclasses

import pytest

from stitchcuda_lab.agents.offline import OfflinePlanner
from stitchcuda_lab.agents.offline.rewrite import rewrite
from stitchcuda_lab.graph import analyse

from .conftest import make_problem

CHAIN = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.randn(16))
        def forward(self, x):
            y = x * 2.0 + self.bias
            y = torch.relu(y) - 0.5
            return torch.tanh(y) * torch.sigmoid(x)
    def get_inputs():
        return [torch.randn(8, 16)]
    def get_init_inputs():
        return []
""")
LN_GELU = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(32)
        def forward(self, x):
            return F.gelu(self.ln(x))
    def get_inputs():
        return [torch.randn(4, 32)]
    def get_init_inputs():
        return []
""")
MLP = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(12, 20), nn.ReLU(), nn.Linear(20, 20), nn.ReLU(),
                                     nn.Linear(20, 4))
        def forward(self, x):
            return self.net(x)
    def get_inputs():
        return [torch.randn(6, 12)]
    def get_init_inputs():
        return []
""")
CONV = make_problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
        def forward(self, x):
            return F.max_pool2d(torch.relu(self.conv(x)), 2)
    def get_inputs():
        return [torch.randn(2, 3, 10, 10)]
    def get_init_inputs():
        return []
""")


def plan_of(problem, settings, device="cpu", graph=None):
    graph = graph or analyse(problem, device="cpu", profile=False)
    if device != graph.device:
        graph = dataclasses.replace(graph, device=device)
    return graph, OfflinePlanner().plan(problem, graph, settings)


def kinds(plan):
    return [t.kind for t in plan.tasks]


def test_pointwise_chain_becomes_one_pointwise_fusion(settings):
    graph, plan = plan_of(CHAIN, settings)
    assert kinds(plan) == ["pointwise_fusion"]
    (t,) = plan.tasks
    assert t.ops == [n.name for n in graph.calls()]
    assert "aten.tanh.default" in t.targets and t.reason and t.technique
    assert {"fusion-rules", "cpu-openmp-vectorization"} <= set(t.refs)


def test_layernorm_gelu_becomes_one_reduction_fusion_covering_both(settings):
    _graph, plan = plan_of(LN_GELU, settings)
    assert kinds(plan) == ["reduction_fusion"]
    assert plan.tasks[0].targets == ["aten.gelu.default", "aten.layer_norm.default"]
    assert "Welford" in plan.tasks[0].technique
    assert "welford-online-softmax" in plan.tasks[0].refs


def test_mlp_gets_two_gemm_epilogues_and_keeps_the_last_linear(settings):
    graph, plan = plan_of(MLP, settings)
    assert kinds(plan) == ["gemm_epilogue", "gemm_epilogue", "keep"]
    lin = [n.name for n in graph.calls() if n.target == "aten.linear.default"]
    relu = [n.name for n in graph.calls() if n.target == "aten.relu.default"]
    # the bias leaves the library call and joins the epilogue as a broadcast add
    assert plan.tasks[0].ops == [lin[0], f"{lin[0]}_bias", relu[0]]
    assert plan.tasks[1].ops == [lin[1], f"{lin[1]}_bias", relu[1]]
    assert plan.tasks[2].ops == [lin[2]] and "library" in plan.tasks[2].reason
    assert "gemm-epilogues" in plan.tasks[0].refs


def test_conv_relu_pool_fuses_the_epilogue_over_the_conv(settings):
    graph, plan = plan_of(CONV, settings)
    assert kinds(plan) == ["gemm_epilogue", "keep"]
    conv, relu, pool = graph.calls()
    # bias, relu and the 2x2 max pool run in one kernel over a free 6-d view of the conv output
    assert plan.tasks[0].ops == [conv.name, f"{conv.name}_bias", relu.name, pool.name]
    assert all("view" in op for op in plan.tasks[1].ops)


def test_shares_come_from_the_eager_profile(settings):
    graph = analyse(MLP, device="cpu", profile=True)
    _, plan = plan_of(MLP, settings, graph=graph)
    assert abs(sum(t.share for t in plan.tasks) - 1.0) < 0.02
    # each task's share is its ops' profiled time over the forward's (not bytes: the times of
    # microsecond ops on a busy host are whatever they were, so they are read, not guessed)
    g = rewrite(graph)
    total = sum(n.time_us or 0.0 for n in g.calls())
    assert total > 0
    for t in plan.tasks:
        if t.ops:
            want = sum(g.node(o).time_us or 0.0 for o in t.ops) / total
            assert t.share == pytest.approx(want, abs=1e-4), t


def test_training_batchnorm_dropout_and_rrelu_follow_the_mode(settings):
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm2d(4)
                self.drop = nn.Dropout(0.2)
                self.act = nn.RReLU()
            def forward(self, x):
                return self.drop(torch.relu(self.bn(x))) + self.act(x * 2.0)
        def get_inputs():
            return [torch.randn(2, 4, 5, 5)]
        def get_init_inputs():
            return []
    """)
    _graph, plan = plan_of(p, settings)
    fused = [t for t in plan.tasks if t.kind == "reduction_fusion"]
    assert len(fused) == 1 and "aten.batch_norm.default" in fused[0].targets
    kept = {r for t in plan.tasks if t.kind == "keep" for r in t.targets}
    assert {"aten.dropout.default", "aten.add_.Tensor", "aten.rrelu.default"} <= kept
    assert any("training" in n for n in plan.notes)
    # a training-mode RReLU draws a slope per element: kept, and its reason says so
    assert any(b.startswith("rrelu") and "random" in b for b in map(str, plan.blockers()))


def test_dropout_of_p_zero_in_training_is_its_input_and_joins_the_kernel(settings):
    """KernelBench's models carry nn.Dropout(p=0.0) in training mode: ATen returns the input
    before drawing anything, so it is the identity, fused like one, and a random op after
    it draws what it drew in the reference."""
    import torch

    from .conftest import generate, run_both
    p = make_problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(p=0.0)
            def forward(self, x):
                y = self.drop(torch.relu(x * 2.0)) + 1.0
                z = F.feature_alpha_dropout(F.dropout(y, 0, training=True), 0.0, True)
                return y, z * torch.rand_like(y)
        def get_inputs():
            return [torch.randn(8, 16)]
        def get_init_inputs():
            return []
    """)
    _graph, plan = plan_of(p, settings)
    kept = {r for t in plan.tasks if t.kind == "keep" for r in t.targets}
    assert not any("dropout" in k for k in kept)
    assert not any("dropout" in b for b in map(str, plan.blockers()))
    _, _, cand = generate(p, settings)
    _, _, ref, new = run_both(p, cand)
    x = p.make_inputs(device="cpu", seed=0)[0]
    outs = []
    for model in (ref, new):
        torch.manual_seed(7)
        outs.append(model(x.clone()))
    for w, g in zip(*outs):
        assert torch.equal(w, g)


def test_noncontiguous_input_is_noted(settings):
    p = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return x * 2.0 + 1.0
        def get_inputs():
            return [torch.randn(6, 5).t()]
        def get_init_inputs():
            return []
    """)
    _, plan = plan_of(p, settings)
    assert any(".contiguous()" in n for n in plan.notes)


def test_cuda_graph_only_when_launch_bound_on_cuda(settings):
    graph = analyse(MLP, device="cpu", profile=False)
    fast = dataclasses.replace(graph, device="cuda", eager_ms=0.03, eager_launches=6)
    slow = dataclasses.replace(graph, device="cuda", eager_ms=5.0, eager_launches=6)
    _, plan = plan_of(MLP, settings, device="cuda", graph=fast)
    assert kinds(plan)[-1] == "cuda_graph" and "cuda-graphs" in plan.tasks[-1].refs
    _, plan = plan_of(MLP, settings, device="cuda", graph=slow)
    assert "cuda_graph" not in kinds(plan)
    _, plan = plan_of(MLP, settings, device="cpu", graph=dataclasses.replace(fast, device="cpu"))
    assert "cuda_graph" not in kinds(plan)


def test_no_cuda_graph_where_its_copies_cost_more_than_the_launches_it_saves(settings):
    # launch-bound in eager (6 launches in 30 us), but the plan fuses the chain into one
    # kernel: a replay would save no launch and add a copy of every input and output
    graph = dataclasses.replace(analyse(CHAIN, device="cpu", profile=False), device="cuda",
                                eager_ms=0.03, eager_launches=6)
    _, plan = plan_of(CHAIN, settings, device="cuda", graph=graph)
    assert kinds(plan) == ["pointwise_fusion"]
    assert any(n.startswith("no CUDA graph: the plan leaves about 1 launch ") for n in plan.notes)


def test_cuda_plans_carry_launch_parameters(settings):
    _, plan = plan_of(LN_GELU, settings, device="cuda")
    p = plan.tasks[0].params
    assert p["rows"] in ("warp", "block") and p["block"] in (128, 256, 512) and p["vec"] in (1, 4)


def test_uncaptured_graph_gets_only_keep_and_cuda_graph(settings):
    p = make_problem("""
        class Model(nn.Module):
            def forward(self, x):
                return x * 2 if x.sum().item() > 0 else x - 1
        def get_inputs():
            return [torch.randn(5)]
        def get_init_inputs():
            return []
    """)
    graph = analyse(p, device="cpu", profile=True)
    assert graph.capture == "none"
    _, plan = plan_of(p, settings, graph=graph)
    assert kinds(plan) == ["keep"]
    _, plan = plan_of(p, settings, device="cuda",
                      graph=dataclasses.replace(graph, device="cuda", eager_launches=3))
    assert set(kinds(plan)) <= {"keep", "cuda_graph"}


def _linear_problem(batch, k, n):
    return make_problem(f"""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear({k}, {n})
        def forward(self, x):
            return torch.relu(self.fc(x))
    def get_inputs():
        return [torch.randn({batch}, {k})]
    def get_init_inputs():
        return []
""")


def test_large_fp32_gemms_get_a_tensor_core_task_on_cuda_only(settings):
    big = _linear_problem(2048, 1024, 2048)                   # 8.6 GFLOP, K = 1024
    graph, plan = plan_of(big, settings, device="cuda")
    (task,) = [t for t in plan.tasks if t.kind == "tensor_core_gemm"]
    assert [graph.node(o).target for o in task.ops] == ["aten.linear.default"]
    assert "tf32x3-split" in task.refs and "3xTF32" in task.technique
    assert "GFLOP" in task.reason
    _, plan = plan_of(big, settings, device="cpu")
    assert "tensor_core_gemm" not in kinds(plan)
    # a short K: the split is timed in the refine round, the first candidate keeps cuBLAS
    _, plan = plan_of(_linear_problem(8192, 128, 4096), settings, device="cuda")
    (task,) = [t for t in plan.tasks if t.kind == "tensor_core_gemm"]
    assert task.params == {"off": True} and "refine round" in task.technique
    assert "K under 512" in task.reason
    # little work, or a K too short for tensor cores' tiles: no task
    _, plan = plan_of(MLP, settings, device="cuda")
    assert "tensor_core_gemm" not in kinds(plan)
    _, plan = plan_of(_linear_problem(65536, 8, 8192), settings, device="cuda")
    assert "tensor_core_gemm" not in kinds(plan)


def test_tensor_cores_setting_off_keeps_gemms_in_fp32_cublas(settings):
    big = _linear_problem(2048, 1024, 2048)
    _, plan = plan_of(big, settings.replace(tensor_cores=False), device="cuda")
    assert "tensor_core_gemm" not in kinds(plan)
    assert any("tensor_cores is off" in n for n in plan.notes)


WRITTEN_THROUGH_A_VIEW = """
    class Model(nn.Module):
        def forward(self, x, y):
            m = x * 2.0
            before = m * 3.0
            flat = m.view(-1)                    # another view, taken before the write
            m.unsqueeze(0).add_(1.0)             # writes m through a view of it
            return before + torch.relu(y), m * 5.0, flat * 7.0
    def get_inputs():
        return [torch.randn(8, 16), torch.randn(8, 16)]
    def get_init_inputs():
        return []
"""


def test_reads_of_memory_written_in_place_stay_on_their_side_of_the_write(settings):
    """An in-place op kept in PyTorch writes ``m`` through a view: what reads ``m`` after it
    shares no kernel with what made ``m`` or read it before, and runs after the write."""
    from stitchcuda_lab.agents.offline.program import schedule
    from stitchcuda_lab.graph import memory_order

    from .conftest import assert_close, generate, run_both
    problem = make_problem(WRITTEN_THROUGH_A_VIEW, name="written_through_a_view")
    graph, plan, cand = generate(problem, settings)
    write = next(n.name for n in graph.calls() if n.opname == "add_")
    edges = memory_order(graph)
    assert set(edges[write]) == {"mul_2", "mul_3"} and edges["mul_1"] == [write], edges
    for t in plan.tasks:
        assert not {"mul", "mul_1"} & set(t.ops) or "mul_2" not in t.ops, (t.id, t.ops)
    assert cand.kernels
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)
    # a group holding the read before the write and an op after it runs before the write
    steps = schedule(graph, [["mul_1", "add"]])
    assert steps.index(("g", 0)) < steps.index(("n", write)) < steps.index(("n", "mul_2"))

