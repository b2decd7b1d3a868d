"""graph.analyse: op classes, hand-counted FLOPs/bytes, placeholders, profile mapping, fallback."""

from __future__ import annotations

import textwrap

import pytest

from stitchcuda_lab.graph import Graph, analyse
from stitchcuda_lab.problem import problem_from_source

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def problem(body: str):
    return problem_from_source(HEADER + textwrap.dedent(body), name="g")


POINTWISE = problem("""
    class Model(nn.Module):
        def forward(self, x, y):
            return torch.relu(x * 2.0 + y).sigmoid()
    def get_inputs():
        return [torch.randn(8, 16), torch.randn(16)]
    def get_init_inputs():
        return []
""")
LN_GELU = problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(32)
        def forward(self, x):
            return F.gelu(self.ln(x))
    def get_inputs():
        return [torch.randn(4, 10, 32)]
    def get_init_inputs():
        return []
""")
MLP = problem("""
    class Model(nn.Module):
        def __init__(self, d_in, d_hidden, d_out):
            super().__init__()
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.fc2 = nn.Linear(d_hidden, d_out)
        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))
    def get_inputs():
        return [torch.randn(6, 12)]
    def get_init_inputs():
        return [12, 20, 5]
""")
CONV = problem("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1, groups=2)
            self.register_buffer("shift", torch.zeros(8, 1, 1))
        def forward(self, x):
            return F.max_pool2d(torch.relu(self.conv(x) + self.shift), 2)
    def get_inputs():
        return [torch.randn(2, 4, 10, 10)]
    def get_init_inputs():
        return []
""")


def by_target(g: Graph) -> dict[str, object]:
    return {n.target: n for n in g.calls()}


def test_pointwise_chain_classes_flops_and_bytes():
    g = analyse(POINTWISE, profile=False)
    calls = g.calls()
    assert [n.target for n in calls] == ["aten.mul.Tensor", "aten.add.Tensor",
                                         "aten.relu.default", "aten.sigmoid.default"]
    assert {n.op_class for n in calls} == {"pointwise"}
    assert [n.flops for n in calls] == [128, 128, 128, 128]     # one per output element
    add = by_target(g)["aten.add.Tensor"]
    assert add.bytes == (128 + 16 + 128) * 4                     # x*2 and y read once, out written
    # the whole forward at minimum reads x and y and writes the output once
    assert g.total_bytes == (128 + 16 + 128) * 4
    assert g.total_flops == 4 * 128


def test_layernorm_gelu_keeps_high_level_ops():
    g = analyse(LN_GELU, profile=False)
    ln, gelu = g.calls()
    assert (ln.target, ln.op_class) == ("aten.layer_norm.default", "normalization")
    assert (gelu.target, gelu.op_class) == ("aten.gelu.default", "pointwise")
    assert ln.flops == 5 * 4 * 10 * 32 and gelu.flops == 4 * 10 * 32
    assert ln.args[1] == [32] and ln.shape == [4, 10, 32] and ln.dtype == "float32"
    assert ln.stride == [320, 32, 1]


def test_mlp_gemm_flops_and_placeholders():
    g = analyse(MLP, profile=False)
    fc1, _relu, fc2 = g.calls()
    assert fc1.target == "aten.linear.default" and fc1.op_class == "gemm"
    assert fc1.flops == 2 * 6 * 20 * 12 and fc2.flops == 2 * 6 * 5 * 20
    params = {n.fqn: n for n in g.placeholders() if n.kind == "param"}
    assert set(params) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert params["fc1.weight"].shape == [20, 12]
    (x,) = [n for n in g.placeholders() if n.kind == "input"]
    assert x.input_index == 0 and x.shape == [6, 12]
    assert fc1.args[0] == {"node": x.name}
    assert "aten.addmm.default" in fc1.lowers_to       # what the library call dispatches to
    assert g.output_spec == "single" and g.output_names() == [fc2.name]


def test_grouped_conv_flops_and_buffers():
    g = analyse(CONV, profile=False)
    t = by_target(g)
    conv = t["aten.conv2d.default"]
    assert conv.op_class == "convolution"
    # 2 * output elements * Cin/groups * kh * kw
    assert conv.flops == 2 * (2 * 8 * 10 * 10) * (4 // 2) * 3 * 3
    assert t["aten.max_pool2d.default"].op_class == "reduction"
    (buf,) = [n for n in g.placeholders() if n.kind == "buffer"]
    assert buf.fqn == "shift"


def test_training_flag_and_batchnorm_buffer_mutation_are_recorded():
    p = problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm1d(4)
            def forward(self, x):
                return self.bn(x)
        def get_inputs():
            return [torch.randn(8, 4)]
        def get_init_inputs():
            return []
    """)
    g = analyse(p, profile=False)
    assert g.training is True
    assert any("num_batches_tracked" in w for w in g.warnings)
    add_ = [n for n in g.calls() if n.target == "aten.add_.Tensor"]
    assert add_ and add_[0].mutates == [0]


def test_in_place_ops_on_fresh_intermediates_read_as_functional_ones():
    # ReLU(inplace=True) after a batch norm and `y += x` on a convolution's output: nothing
    # reads the old tensors, so a kernel may compute them like relu and add
    p = problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 3, padding=1)
                self.bn = nn.BatchNorm2d(4)
                self.relu = nn.ReLU(inplace=True)
            def forward(self, x):
                y = self.conv(x)
                y += x
                return self.relu(self.bn(y))
        def get_inputs():
            return [torch.randn(2, 4, 6, 6)]
        def get_init_inputs():
            return []
    """)
    g = analyse(p, profile=False)
    ops = [n.target for n in g.calls()]
    assert "aten.relu.default" in ops and "aten.relu_.default" not in ops
    assert ops.count("aten.add.Tensor") == 1
    # the batch norm's counter is a buffer: its update stays in place
    (counter,) = [n for n in g.calls() if n.target == "aten.add_.Tensor"]
    assert counter.mutates == [0] and g.node(counter.inputs()[0]).kind == "buffer"


def test_many_mutated_buffers_make_one_warning_that_counts_them():
    p = problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bns = nn.Sequential(*[nn.BatchNorm2d(4) for _ in range(6)])
            def forward(self, x):
                return self.bns(x)
        def get_inputs():
            return [torch.randn(2, 4, 6, 6)]
        def get_init_inputs():
            return []
    """)
    g = analyse(p, profile=False)
    said = [w for w in g.warnings if "mutates" in w]
    assert len(said) == 1, said
    assert said[0].startswith("forward mutates 18 buffers in place (num_batches_tracked, "
                              "running_mean, running_var of 6 modules: bns.0, bns.1")
    assert "and 2 more" in said[0]


def test_in_place_ops_on_inputs_parameters_and_views_stay_in_place():
    p = problem("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(16))
            def forward(self, x):
                y = x * 2.0
                z = y + 1.0
                y.relu_()          # z read y before: fine
                t = y * 3.0
                t.tanh_()          # later reads of t are reads of the tanh_ (the trace says so)
                v = z.view(16, 8)
                v.exp_()           # a view: the write reaches z
                a = x * 4.0
                a_flat = a.view(-1)  # a view taken before, read after
                a.cos_()
                b = x.to(torch.float32)   # the same dtype: b is x
                b.sin_()
                with torch.no_grad():
                    self.w.mul_(1.0)   # a parameter
                return y + x.sigmoid_() + t + z + self.w + a_flat.view(8, 16)   # x: the caller's
        def get_inputs():
            return [torch.randn(8, 16)]
        def get_init_inputs():
            return []
    """)
    g = analyse(p, profile=False)
    ops = [n.opname for n in g.calls()]
    assert "relu" in ops and "relu_" not in ops and "tanh" in ops and "tanh_" not in ops
    assert {"sigmoid_", "exp_", "mul_", "cos_", "sin_"} <= set(ops), ops


def test_profile_maps_eager_time_to_nodes():
    g = analyse(MLP, profile=True)
    assert g.eager_ms is not None and g.eager_ms > 0
    assert all(n.time_us is not None and n.time_us > 0 for n in g.calls())


def test_capture_failure_falls_back_with_a_reason():
    p = problem("""
        class Model(nn.Module):
            def forward(self, x):
                if x.sum().item() > 0:
                    return x * 2
                return x - 1
        def get_inputs():
            return [torch.randn(5)]
        def get_init_inputs():
            return []
    """)
    g = analyse(p, profile=True)
    assert g.capture == "none"
    assert any("export" in w for w in g.warnings)
    assert [n.kind for n in g.nodes] == ["input"] and g.nodes[0].shape == [5]
    assert g.eager_ms is not None


def test_graph_round_trips_through_json_and_summarises():
    g = analyse(LN_GELU, profile=False)
    again = Graph.from_dict(g.to_dict())
    assert again == g
    text = g.summary()
    assert "aten.layer_norm.default" in text and "normalization" in text


@pytest.mark.gpu
def test_analyse_on_cuda_profiles_device_time():
    g = analyse(MLP, device="cuda", profile=True)
    assert g.device.startswith("cuda")
    assert all(n.time_us is not None for n in g.calls())
    assert g.eager_launches and g.eager_launches >= 3
