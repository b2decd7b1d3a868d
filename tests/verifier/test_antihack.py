"""The op policy: which traced aten ops count as a PyTorch fallback."""

from __future__ import annotations

import torch

from stitchcuda_lab.verifier.antihack import (find_fallback, foreign_work_allowed, make_tracer,
                                             norm, op_class, any_overlap)

REF = ["aten.mul.Tensor", "aten.add.Tensor", "aten.relu.default"]


def test_names_normalise_to_the_op_packet():
    for name in ("aten.add.Tensor", "aten::add", "add", "add_", "aten.add_.Tensor", "torch.add"):
        assert norm(name) == "add"
    assert norm("aten._to_copy.default") == "_to_copy"
    assert op_class("aten.empty_like.default") == "cheap"
    assert op_class("aten.addmm.default") == "library"
    assert op_class("aten.relu.default") == "compute"


def test_explicit_replaced_ops_that_run_are_fallbacks():
    ops = ["aten.relu.default", "aten.empty_like.default", "aten.sigmoid.default"]
    assert find_fallback(ops, replaced=["aten.relu"], kept=[], reference_ops=REF) == [
        "aten.relu.default"]


def test_claiming_everything_makes_every_unkept_compute_op_a_fallback():
    ops = ["aten.sigmoid.default", "aten.mm.default", "aten.view.default"]
    assert find_fallback(ops, replaced=["*"], kept=["aten.mm"], reference_ops=REF) == [
        "aten.sigmoid.default"]
    # covering all of the reference's compute ops is the same claim
    assert find_fallback(ops, replaced=REF, kept=[], reference_ops=REF) == [
        "aten.mm.default", "aten.sigmoid.default"]


def test_what_code_a_forward_may_spend_time_in_follows_the_same_policy():
    # (PyTorch's CPU kernels, GEMM / convolution libraries), for the CPU sampler
    assert foreign_work_allowed(replaced=None, kept=[],
                                reference_ops=REF + ["aten.mm.default"]) == (False, True)
    # a file on a problem with no GEMM, convolution or attention: no library time either
    assert foreign_work_allowed(replaced=None, kept=["aten.mm"],
                                reference_ops=["aten.relu", "aten.add"]) == (False, False)
    assert foreign_work_allowed(replaced=["*"], kept=[], reference_ops=REF) == (False, False)
    assert foreign_work_allowed(replaced=["*"], kept=["aten.mm"], reference_ops=REF) == (
        False, True)
    assert foreign_work_allowed(replaced=REF, kept=["aten.sigmoid"], reference_ops=REF) == (
        True, False)
    # a plan that replaces some of the reference's ops runs the rest in PyTorch
    assert foreign_work_allowed(replaced=["aten.relu"], kept=[], reference_ops=REF) == (
        True, True)


def test_inferred_policy_allows_library_and_declared_ops_only():
    ops = ["aten.mm.default", "aten.mul_.Tensor", "aten.tanh.default", "aten.clone.default"]
    assert find_fallback(ops, replaced=None, kept=["aten.mul"], reference_ops=REF) == [
        "aten.tanh.default"]


def test_tracer_sees_functional_method_and_inplace_calls():
    x = torch.randn(4)
    with make_tracer() as tr:
        torch.nn.functional.relu(x)
        x.mul(2).add_(1)
        torch.empty_like(x)
    assert {"aten.relu.default", "aten.mul.Tensor", "aten.add_.Tensor",
            "aten.empty_like.default"} <= set(tr.counts)


def test_overlap_detects_views_and_shared_storage():
    x = torch.randn(10)
    assert any_overlap([x[2:5]], [x])
    assert any_overlap([x.view(2, 5)], [x])
    assert not any_overlap([x.clone()], [x])


def test_precision_switches_are_seen_and_restored_whichever_api_flipped_them():
    from stitchcuda_lab.verifier.antihack import (changed_numerics, numerics_flags,
                                                   restore_numerics)
    saved = numerics_flags()
    assert "unreadable" not in saved.values()
    b = torch.backends
    flips = [lambda: setattr(b.cuda.matmul, "allow_tf32", True),
             lambda: torch.set_float32_matmul_precision("medium"),
             lambda: setattr(b.cuda.matmul, "fp32_precision", "tf32"),
             lambda: setattr(b, "fp32_precision", "tf32"),
             lambda: setattr(b.cudnn, "allow_tf32", not b.cudnn.allow_tf32),
             # both APIs mixed: torch can no longer read the legacy switch back
             lambda: (setattr(b.cuda.matmul, "allow_tf32", True),
                      setattr(b.cuda.matmul, "fp32_precision", "ieee"))]
    try:
        for flip in flips:
            flip()
            assert changed_numerics(saved)
            restore_numerics(saved)
            assert numerics_flags() == saved and not changed_numerics(saved)
    finally:
        restore_numerics(saved)


def test_a_kept_library_op_stands_for_its_family():
    # linear dispatches to matmul, then mm or addmm, depending on shapes and device
    traced = ["aten::linear", "aten::matmul", "aten::mm"]
    assert find_fallback(traced, replaced=["aten.gelu.default"],
                         kept=["aten.linear.default"]) == []
    # ... but a kept GEMM does not cover a convolution, nor the compute it replaced
    assert find_fallback(traced + ["aten::convolution"], replaced=["aten.convolution.default"],
                         kept=["aten.mm.default"]) == ["aten::convolution"]
    assert find_fallback(traced + ["aten::gelu"], replaced=["aten.gelu.default", "aten.mm"],
                         kept=[]) == ["aten::gelu", "aten::mm"]


def test_own_kernels_are_named_wherever_launch_bounds_stand():
    from stitchcuda_lab.verifier.verify import own_kernels
    src = ('extern "C" __global__ void __launch_bounds__(256) row(const float* x) {}\n'
           '__global__ __launch_bounds__(128, 2) void pre(int n) {}\n'
           'template <int B> __global__ void tmpl (float* y) {}\n'
           '@triton.jit\ndef tri(x):\n    pass\n')
    assert own_kernels(src) == {"row", "pre", "tmpl", "tri"}
    # other attributes with arguments before the name (a cluster's, through a macro too),
    # a GCC attribute after the parameters, a head over two lines
    src = ('__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(64) a(float* x) {}\n'
           '__global__ void __launch_bounds__(1024) SC_CLUSTER(8) b(const float* x) {}\n'
           '__global__ void c(int n) __attribute__((used)) {}\n'
           '__global__ void __launch_bounds__(128, 2)\nd (const float* __restrict__ y);')
    assert own_kernels(src) == {"a", "b", "c", "d"}


def test_held_outputs_stay_alive_up_to_the_budget_then_count_while_their_storage_lives():
    import gc

    from stitchcuda_lab.verifier.antihack import Held
    held = Held(budget=3 * 4096)
    outs = [torch.empty(1024) for _ in range(5)]           # 4 KiB each
    ids = [o.untyped_storage().data_ptr() for o in outs]
    held.add(outs)
    assert len(held.strong) == 3 and len(held.weak) == 2 and held.bytes <= held.budget
    kept = outs[0]                                          # the candidate keeps the oldest
    del outs
    gc.collect()
    assert held.overlaps(kept[10:20])                       # demoted, but its storage lives
    del kept
    gc.collect()
    fresh = torch.empty(1024)
    # a freed, demoted output's memory handed out again by the allocator is no reuse
    if fresh.untyped_storage().data_ptr() == ids[0]:
        assert not held.overlaps(fresh)
    assert len(held.weak) <= 1                              # dead references pruned
    newest = held.strong[-1][0]
    assert held.overlaps(newest[:5])                        # the newest are held strongly


def test_many_outputs_are_asked_about_at_once_and_a_held_storage_is_read_afresh():
    from stitchcuda_lab.verifier.antihack import Held, any_overlap, spans_meet
    held = Held(budget=1 << 20)
    outs = [torch.empty(64) for _ in range(40)]
    held.add(outs)
    fresh = [torch.empty(64) for _ in range(7)]
    assert not held.overlaps(*fresh)
    assert held.overlaps(*fresh, outs[23][5:9])            # one of many is enough
    assert not held.overlaps()
    # code that kept a held output moves its storage: the new memory is still the held one's
    outs[7].untyped_storage().resize_(1 << 16)
    assert held.overlaps(torch.empty(0).set_(outs[7].untyped_storage()))
    whole = torch.empty(100)
    assert any_overlap([torch.empty(3), whole[50:60]], [torch.empty(3), whole[:10]])
    assert not any_overlap([torch.empty(3)], [])
    # spans that touch share no byte; another device shares none
    assert not spans_meet([(100, 200, "cpu")], [(200, 300, "cpu"), (0, 100, "cpu")])
    assert spans_meet([(100, 200, "cpu")], [(0, 101, "cpu")])
    assert not spans_meet([(100, 200, "cpu")], [(0, 300, "cuda:0"), None])
    assert spans_meet([None, (5, 6, "cpu")], [(300, 400, "cpu"), (0, 10, "cpu")])


def test_one_output_larger_than_the_budget_is_held_weakly():
    from stitchcuda_lab.verifier.antihack import Held
    held = Held(budget=1024)
    big = torch.empty(4096)
    held.add([big])
    assert not held.strong and held.overlaps(big)
