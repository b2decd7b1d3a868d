"""What the LLM agents are told: retrieval judged on a test set, the hardware, the eager
profile as the Verifier measures it, and mismatch feedback that says where and how."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from stitchcuda_lab.agents.llm.coder import feedback_text, profile_text
from stitchcuda_lab.agents.llm.context import (
    applicable,
    default_knowledge,
    eager_profile,
    hardware_text,
    rag_query,
    retrieve,
)
from stitchcuda_lab.graph import Graph, Node, analyse
from stitchcuda_lab.problem import load_problem
from stitchcuda_lab.verdict import TrialResult, Verdict
from stitchcuda_lab.verifier.mismatch import describe
from stitchcuda_lab.verifier.verify import compare

PROBLEMS = Path(__file__).resolve().parents[2] / "benchmarks" / "problems"
GRAPHS = Path(__file__).resolve().parents[1] / "fixtures" / "llm" / "graphs.json"

# The retrieval test set: for a problem on a device, the sections that must come first (in any
# order among themselves) and sections that must not be shown at all.
CASES = [
    ("01_pointwise_bias_gelu_scale", "cuda", ["fusion-rules"],
     ["gemm-epilogues", "cublaslt-epilogues", "conv-epilogue-fusion", "cpu-openmp-vectorization",
      "timing-methodology", "fp16-bf16-accuracy", "softmax-kernels"]),
    ("01_pointwise_bias_gelu_scale", "cpu", ["cpu-openmp-vectorization", "fusion-rules"],
     ["gemm-epilogues", "cublaslt-epilogues", "vectorized-access", "grid-stride-loops",
      "warp-shuffle-reductions"]),
    ("05_softmax_wide_row", "cuda", ["softmax-kernels"],
     ["layernorm-kernels", "gemm-epilogues", "fp16-bf16-accuracy", "cpu-openmp-vectorization"]),
    ("06_softmax_log_temperature", "cpu", ["softmax-kernels", "cpu-openmp-vectorization"],
     ["layernorm-kernels", "warp-shuffle-reductions"]),
    ("07_norm_layernorm_gelu", "cuda", ["layernorm-kernels"],
     ["batchnorm-train-eval", "gemm-epilogues", "softmax-kernels", "cublaslt-epilogues"]),
    ("11_norm_batchnorm_eval_relu", "cuda", ["batchnorm-train-eval"],
     ["layernorm-kernels", "gemm-epilogues"]),
    ("14_reduction_argmax_dim", "cuda", ["reduction-along-dim"],
     ["fusion-rules", "gemm-epilogues", "softmax-kernels"]),
    ("16_gemm_linear_bias_relu", "cuda", ["gemm-epilogues"],
     ["conv-epilogue-fusion", "layernorm-kernels", "softmax-kernels"]),
    ("16_gemm_linear_bias_relu", "cpu", ["gemm-epilogues", "cpu-openmp-vectorization"],
     ["cublaslt-epilogues", "tf32x3-split", "tensor-cores-precision"]),
    ("21_conv_conv2d_relu_maxpool", "cuda", ["pooling-kernels", "conv-epilogue-fusion"],
     ["gemm-epilogues", "cublaslt-epilogues", "batchnorm-train-eval"]),
    ("28_model_gru_cell_loop", "cuda", ["rnn-cell-fusion"],
     ["conv-epilogue-fusion", "softmax-kernels", "layernorm-kernels"]),
]


@pytest.fixture(scope="module")
def kb():
    return default_knowledge()


@pytest.fixture(scope="module")
def graphs():
    """The captured graphs (tests/fixtures/llm/make_graphs.py), for problems unchanged since."""
    recorded = json.loads(GRAPHS.read_text())
    for name in {c[0] for c in CASES}:
        assert recorded[name]["problem_sha256"] == load_problem(PROBLEMS / f"{name}.py").digest(), \
            f"{name} changed: run tests/fixtures/llm/make_graphs.py"
    return {name: r["graph"] for name, r in recorded.items()}


def test_a_recorded_graph_is_what_capture_gives_today():
    name = "05_softmax_wide_row"
    live = analyse(load_problem(PROBLEMS / f"{name}.py"), device="cpu", profile=False)
    recorded = json.loads(GRAPHS.read_text())[name]["graph"]
    assert [(n["name"], n["target"], n["op_class"]) for n in recorded["nodes"]] == \
        [(n.name, n.target, n.op_class) for n in live.nodes]


@pytest.mark.parametrize("name,device,first,never", CASES,
                         ids=[f"{c[0][:2]}-{c[1]}" for c in CASES])
def test_retrieval_puts_the_relevant_sections_first(kb, graphs, name, device, first, never):
    g = Graph.from_dict(graphs[name])
    g.device = device
    hits = [h["id"] for h in retrieve(kb, rag_query(g), 4, g)]
    assert set(hits[:len(first)]) == set(first), hits
    assert not set(hits) & set(never), hits
    assert all(applicable(h, g) for h in hits)


def test_the_retrieval_test_set_can_fail(kb, graphs):
    # without the relevance rules, the old query shows GEMM sections for a pointwise problem
    g = Graph.from_dict(graphs["01_pointwise_bias_gelu_scale"])
    g.device = "cuda"
    old = [h.id for h in kb.search("pointwise add gelu mul cuda", 4)]
    assert {"gemm-epilogues", "cublaslt-epilogues"} & set(old)
    assert not {"gemm-epilogues", "cublaslt-epilogues"} & {
        h["id"] for h in retrieve(kb, rag_query(g), 4, g)}


def test_weak_hits_are_dropped_rather_than_padding_the_prompt(kb, graphs):
    g = Graph.from_dict(graphs["07_norm_layernorm_gelu"])
    g.device = "cuda"
    hits = retrieve(kb, rag_query(g), 8, g)
    assert len(hits) < 8 and all(h["score"] >= 0.3 * hits[0]["score"] for h in hits)


# ------------------------------------------------------------------ hardware and timings


def test_doctor_measures_the_cpu_the_agents_are_told_about():
    from stitchcuda_lab.doctor import device_facts
    f = device_facts("cpu")
    assert f["cores"] >= 1 and f["bandwidth_gbs"] > 0.1 and f["fp32_tflops"] > 0
    text = hardware_text(f)
    assert f"{f['cores']} CPU cores for OpenMP" in text and "GB/s (copy)" in text
    assert "TFLOP/s" in text and "bytes moved / bandwidth" in text


def test_gpu_facts_read_as_the_model_needs_them():
    text = hardware_text({"name": "NVIDIA H200", "capability": "90", "sms": 132,
                          "max_threads_per_sm": 2048, "shared_memory_per_block_kb": 227,
                          "l2_mb": 60.0, "memory_gb": 139.8, "bandwidth_gbs": 3950.0,
                          "fp32_tflops": 51.2, "tf32_tflops": 378.0})
    assert "NVIDIA H200 (sm_90)" in text and "132 SMs" in text and "227 KB shared" in text
    assert "memory bandwidth 3950 GB/s" in text and "TF32 tensor cores 378.0 TFLOP/s" in text


def _node(name, target, op_class, time_us):
    return Node(name=name, op="call_function", target=target, op_class=op_class, args=[],
                kwargs={}, shape=[64, 256], dtype="float32", time_us=time_us)


def test_the_eager_profile_is_the_verifiers_time_and_compute_shares():
    g = Graph(nodes=[_node("e", "aten.empty_like.default", "data_movement", 40.0),
                     _node("add", "aten.add.Tensor", "pointwise", 10.0),
                     _node("gelu", "aten.gelu.default", "pointwise", 30.0)],
              outputs=[], capture="torch.export", device="cpu", eager_ms=94.0)
    text = eager_profile(g, {"eager": 1.02, "eager_wall": 1.3, "compile:default": 0.71})
    assert "eager forward: 1.02 ms, timed by the Verifier" in text
    assert "torch.compile (default): 0.71 ms" in text
    assert "separate profiled run (94 ms); read it as shares" in text
    assert "gelu (aten.gelu.default" in text and "75% of the compute ops' time" in text
    assert "empty_like" not in text                # allocation is not where the time goes


def test_an_allocation_alone_is_never_reported_as_all_the_time():
    g = Graph(nodes=[_node("e", "aten.empty_like.default", "data_movement", 40.0),
                     _node("add", "aten.add.Tensor", "pointwise", 0.0)],
              outputs=[], capture="torch.export", device="cpu", eager_ms=0.68)
    text = eager_profile(g)
    assert "100%" not in text and "empty_like" not in text and "no per-op times" in text
    assert "0.680 ms (one profiled run; the Verifier times the reference again)" in text


# ------------------------------------------------------------------ mismatch feedback


def _compare(out, ref):
    return compare(out, ref, 1e-4, 1e-4)


def test_a_missing_tail_is_located():
    ref = torch.randn(8, 100)
    out = ref.clone()
    out[:, 96:] = 0.0                                  # the remainder after float4 groups
    r = _compare(out, ref)
    assert not r["ok"] and "along dim 1 (size 100): indices 96-99 only (the last 4)" in r["msg"]
    assert "along dim 0" not in r["msg"]               # every row has it
    assert "zeros where the reference has numbers" in r["msg"]


def test_one_bad_row_in_every_block_shows_the_stride():
    ref = torch.randn(64, 32)
    out = ref.clone()
    out[3::8] += 1.0
    msg = _compare(out, ref)["msg"]
    assert "along dim 0 (size 64): indices 3, 11, 19, 27, ... (8 of 64) only" in msg
    assert "off by +1 (a constant offset)" in msg


@pytest.mark.parametrize("change,words", [
    (lambda r: r * 2.0, "2x the reference (a constant factor)"),
    (lambda r: -r, "the sign is flipped"),
    (lambda r: torch.full_like(r, float("nan")), "NaN where the reference has numbers"),
    (lambda r: torch.cat([r[:, 1:], r[:, -1:]], dim=1), "right neighbour's (an index off by one)"),
])
def test_the_pattern_of_the_error_is_named(change, words):
    ref = torch.rand(16, 64) + 0.5
    msg = _compare(change(ref), ref)["msg"]
    assert words in msg and "first at [0, " in msg and "got " in msg and "expected " in msg


def test_scattered_errors_are_called_scattered():
    torch.manual_seed(0)
    ref = torch.randn(32, 32)
    out = ref + (torch.rand(32, 32) < 0.3) * 1e-2
    msg = _compare(out, ref)["msg"]
    assert "scattered" in msg and "no index of any dimension is spared" in msg


def test_a_correct_output_has_no_description():
    ref = torch.randn(4, 4)
    assert describe(ref.clone(), ref, torch.zeros(4, 4, dtype=torch.bool)) == ""
    assert _compare(ref.clone(), ref)["msg"] == ""


def test_the_coder_reads_where_the_outputs_differ():
    trial = TrialResult(seed=3, ok=False, max_abs_err=0.9, mismatches=32,
                        message="output_mismatch: 32 of 800 elements out of tolerance; along "
                                "dim 1 (size 100): indices 96-99 only (the last 4)")
    v = Verdict(status="incorrect", trials=[trial], atol=1e-4, rtol=1e-4,
                profile={"kernels": [{"name": "k", "total_us": 3.0}],
                         "reference_kernels": [{"name": "aten::gelu", "total_us": 9.0}],
                         "reference": [{"lane": "cpu", "name": "row"}] * 300,
                         "candidate": [{"lane": "cpu", "name": "row"}] * 300})
    text = feedback_text(v)
    assert "indices 96-99 only (the last 4)" in text
    prof = profile_text(v.profile)
    assert "reference (eager) kernels" in prof and "aten::gelu" in prof
    assert '"lane"' not in prof                        # timeline rows are not dumped


@pytest.mark.gpu
def test_doctor_measures_the_gpu_and_leaves_its_precision_alone():
    from stitchcuda_lab.doctor import device_facts
    before = torch.backends.cuda.matmul.allow_tf32
    f = device_facts("cuda")
    assert torch.backends.cuda.matmul.allow_tf32 == before
    props = torch.cuda.get_device_properties(0)
    assert f["sms"] == props.multi_processor_count and f["name"] == props.name
    assert f["bandwidth_gbs"] > 100 and f["fp32_tflops"] > 1 and f["fp16_tflops"] > f["fp32_tflops"]
    if torch.cuda.get_device_capability(0)[0] >= 8:
        assert f["tf32_tflops"] > f["fp32_tflops"]
    assert f"{f['sms']} SMs" in hardware_text(f)


@pytest.mark.gpu
def test_mismatches_are_located_where_the_tensors_are():
    ref = torch.randn(1024, 1000, device="cuda")
    out = ref.clone()
    out[:, 996:] = float("nan")
    r = _compare(out, ref)
    assert "indices 996-999 only (the last 4)" in r["msg"] and "NaN where the reference" in r["msg"]
