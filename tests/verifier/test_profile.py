"""verifier/profile.py: what the judge reads from a trace."""

from stitchcuda_lab.verifier import profile


def kernel(name: str, ts: float, dur: float, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def test_device_time_of_kernels_one_after_another_is_their_sum():
    trace = {"traceEvents": [kernel("a", 0, 1000), kernel("b", 1500, 500)]}
    assert profile.device_ms(trace) == 1.5


def test_device_time_counts_overlapping_kernels_once():
    # a CUDA graph's parallel branches (cuDNN's RNN layers side by side) overlap in time: the
    # device was busy 3 ms, not the 5.5 ms their durations add up to
    trace = {"traceEvents": [kernel("layer0", 0, 2000), kernel("layer1", 500, 2000),
                             kernel("inside", 600, 1000), kernel("copy", 2500, 500,
                                                                 cat="gpu_memcpy")]}
    assert profile.device_ms(trace) == 3.0


def test_device_time_leaves_out_fills_and_host_events():
    trace = {"traceEvents": [kernel("vectorized_fill_kernel", 0, 5000), kernel("k", 0, 1000),
                             kernel("aten::add", 0, 9000, cat="cpu_op")]}
    assert profile.device_ms(trace) == 1.0


def test_torch_compiles_graphs_are_found_by_the_mark_around_their_calls():
    # what a CPU trace of a compiled forward holds: Dynamo's and Inductor's marks, no aten op
    marks = ["TorchDynamo Cache Lookup", "Torch-Compiled Region: 0/0",
             "## Call CompiledFxGraph fy5jzx52 ##"]
    trace = {"traceEvents": [kernel(n, 0, 10, cat="cpu_op") for n in marks]}
    assert profile.compiled_graphs(trace) == ["## Call CompiledFxGraph fy5jzx52 ##"]
    assert profile.compiled_graphs({"traceEvents": [kernel("aten::add", 0, 1, "cpu_op")]}) == []


def test_ops_of_every_operator_namespace_are_read_from_a_trace():
    # oneDNN's fused ops (a GEMM with its ReLU) are no aten op, and a trace that kept only
    # aten's showed none of a candidate's work; the autograd engine's and the profiler's own
    # records (record_function's enter and exit are registered ops) are no op
    trace = {"traceEvents": [kernel(n, 0, 10, cat="cpu_op") for n in (
        "aten::add", "aten::add", "mkldnn::_linear_pointwise", "quantized::linear",
        "autograd::engine::evaluate_function: AddBackward0", "ProfilerStep#1",
        "torch::autograd::AccumulateGrad", "profiler::_record_function_enter_new",
        "profiler::_record_function_exit._RecordFunction")]
        + [kernel("my_region", 0, 10, cat="user_annotation")]}
    assert profile.cpu_ops(trace) == {"aten::add": 2, "mkldnn::_linear_pointwise": 1,
                                      "quantized::linear": 1}
