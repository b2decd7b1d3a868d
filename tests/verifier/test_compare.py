"""verifier/compare.py: outputs of any size, and references less precise than their dtype."""

import math
import re

import pytest
import torch

from stitchcuda_lab.verifier import compare as cmp
from stitchcuda_lab.verifier.compare import compare, within_reference_error


def tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to TF32 (10 mantissa bits, to nearest), as tensor cores read fp32."""
    i = x.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).float()


def conv_like(seed: int = 0):
    """A product with a convolution's reduction length (64 channels x 3 x 3): the operands, its
    float64 result and the TF32 one (what PyTorch's default convolution returns)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 576, generator=g)
    w = torch.randn(576, 64, generator=g) / 24
    truth = x.double() @ w.double()
    return x, w, truth, (tf32(x).double() @ tf32(w).double()).float()


def test_chunks_give_the_same_verdict_as_one_pass(monkeypatch):
    ref = torch.randn(1000, 33)
    out = ref.clone()
    out[17, 3] += 1.0
    out[999, 32] = float("nan")
    whole = compare(out, ref, 1e-4, 1e-4)
    monkeypatch.setattr(cmp, "CPU_CHUNK", 97)   # many chunks, none aligned with a row
    chunked = compare(out, ref, 1e-4, 1e-4)
    assert chunked["mismatches"] == whole["mismatches"] == 2
    assert chunked["reason"] == whole["reason"] == "uninitialized_output"
    assert chunked["msg"] == whole["msg"] and "[17, 3]" in chunked["msg"]
    assert abs(chunked["norm_rel"] - whole["norm_rel"]) < 1e-12


def test_a_gpu_compares_in_large_pieces_and_the_cpu_in_pieces_that_stay_in_cache():
    # a GPU pass costs a launch, so its pieces are large; a CPU pass over 128 MB faults in
    # fresh pages, so the CPU's pieces are a few MB (compare.CPU_CHUNK's comment: 2.5x faster)
    assert cmp._chunk(torch.empty(0, device="meta")) == cmp.CHUNK >= 1 << 24
    assert cmp._chunk(torch.empty(0)) == cmp.CPU_CHUNK <= 1 << 20
    assert [s.stop - s.start for s in cmp._chunks(torch.empty(cmp.CPU_CHUNK * 2 + 5))] == [
        cmp.CPU_CHUNK, cmp.CPU_CHUNK, 5]


def test_bitwise_sameness_is_told_in_pieces_with_nan_equal_to_nan(monkeypatch):
    """``same`` (a second call against the first, outputs against their snapshot) compares
    in pieces (``_chunk``: CPU_CHUNK elements here): whole, its masks held three bytes per
    element beside both tensors."""
    from torch.profiler import ProfilerActivity, profile
    monkeypatch.setattr(cmp, "CPU_CHUNK", 1 << 12)
    a = torch.randn(300, 1000)
    a[123, 456] = a[299, 999] = float("nan")
    b = a.clone()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        assert cmp.same(a, b)
    assert max(ev.cpu_memory_usage for ev in p.events()) <= 4 * (1 << 12)
    b[299, 998] += 1e-6   # in the last piece
    assert not cmp.same(a, b)
    c = a.clone()
    c[0, 0] = float("nan")
    assert not cmp.same(a, c) and not cmp.same(a.t(), a) and cmp.same(a.t(), a.t().clone())
    assert cmp.same(torch.arange(10), torch.arange(10)) and not cmp.same(a, a.double())
    # channels-last (not contiguous): in slices, no whole copy of either side
    x = torch.randn(8, 16, 32, 32).to(memory_format=torch.channels_last)
    y = x.clone()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        assert cmp.same(x, y)
    assert max(ev.cpu_memory_usage for ev in p.events()) <= 4 * (1 << 12)
    y[7, 15, 31, 30] = 0.5
    assert not cmp.same(x, y)
    big = torch.arange(3 * 5000 * 2).view(3, 5000, 2).transpose(1, 2)   # slices past a piece
    assert cmp.same(big, big.clone()) and not cmp.same(big, big.clone().mul_(2))


def truncated(x: torch.Tensor) -> torch.Tensor:
    """``x`` as TF32 by dropping the low 13 bits (what some tensor-core kernels do)."""
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_another_tf32_kernel_fails_against_a_tf32_reference_but_passes_within_its_error():
    x, w, truth, ref = conv_like()
    # TF32 truncated instead of rounded, summed in fp32 in another order (another algorithm)
    other = sum(truncated(x[:, i:i + 64]) @ truncated(w[i:i + 64]) for i in range(0, 576, 64))
    assert not compare(other, ref, 1e-4, 1e-4)["ok"]
    r = within_reference_error(other, ref, truth, 1e-4, 1e-4)
    assert r["ok"], r["msg"]
    assert "float64" in r["widened"]


def test_a_fused_prologue_rounding_its_last_bit_differently_passes_within_the_reference_error():
    x, w, truth, ref = conv_like(1)
    nudged = x * (1 + 2 ** -23)   # one ulp: a prologue fused in another order
    out = (tf32(nudged).double() @ tf32(w).double()).float()
    assert within_reference_error(out, ref, truth, 1e-4, 1e-4)["ok"]


def test_bf16_arithmetic_is_not_let_through_by_a_tf32_reference():
    x, w, truth, ref = conv_like(2)
    out = (bf16(x).double() @ bf16(w).double()).float()
    r = within_reference_error(out, ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and r["reason"] == "output_mismatch"
    assert "reference's own" in r["msg"]


def test_a_wrong_output_fails_even_within_the_reference_error():
    x, w, truth, ref = conv_like(3)
    out = ref.clone()
    out[100:110] *= 1.01   # a tenth of a row computed 1% off
    assert not within_reference_error(out, ref, truth, 1e-4, 1e-4)["ok"]
    out = ref.clone()
    out[:, -1] = 0.0       # a channel never written (as zeros)
    assert not within_reference_error(out, ref, truth, 1e-4, 1e-4)["ok"]


def test_a_reference_far_from_its_fp32_result_widens_nothing():
    # a forward that draws random numbers (or a discrete result) differs from its other run by
    # far more than rounding: that difference must not become the tolerance
    ref = torch.randn(256, 256)
    truth = torch.randn(256, 256)
    out = ref + 0.05 * torch.randn(256, 256)
    r = within_reference_error(out, ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "widened" not in r


def test_an_exact_reference_allows_no_more_than_the_tolerance():
    x, w, truth, _ = conv_like(4)
    out = (tf32(x).double() @ tf32(w).double()).float()
    exact = truth.float()   # a reference as exact as fp32 can be: TF32 arithmetic stays out
    assert not compare(out, exact, 1e-4, 1e-4)["ok"]
    assert not within_reference_error(out, exact, truth, 1e-4, 1e-4)["ok"]


def test_a_few_discrete_flips_in_the_reference_do_not_become_every_elements_allowance():
    # a max whose tie the float64 run breaks the other way: a few large errors among none
    truth = torch.randn(512, 512, dtype=torch.float64)
    ref = truth.float()
    ref[3, 7] += 0.5
    ref[400, 2] -= 0.5
    out = (truth + 0.01 * torch.randn_like(truth)).float()   # 1% off everywhere
    r = within_reference_error(out, ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "widened" not in r
    assert "a few errors far above its typical one" in r["msg"]


def test_a_reference_far_from_float64_allows_nothing_and_the_message_says_why():
    # a deep network on TF32 convolutions: its fp32 reference is 8% from float64 (ResNet-101
    # in training mode on the H200); a candidate must then match the reference itself
    g = torch.Generator().manual_seed(3)
    truth = torch.randn(256, 256, dtype=torch.float64, generator=g)
    ref = (truth * (1 + 0.08 * torch.randn(256, 256, dtype=torch.float64, generator=g))).float()
    r = within_reference_error(truth.float(), ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "widened" not in r
    assert "8.0" in r["msg"] or "7.9" in r["msg"] or "8.1" in r["msg"]
    assert "only the same arithmetic in the same order agrees with it" in r["msg"]
    assert within_reference_error(ref.clone(), ref, truth, 1e-4, 1e-4)["ok"]


def test_integer_outputs_stay_exact():
    ref = torch.arange(10)
    assert not within_reference_error(ref + 1, ref, ref + 3, 0.0, 0.0)["ok"]


def test_many_flips_in_the_reference_still_allow_only_rounding_elsewhere():
    # a hundred discrete differences from float64 (0.04% of the outputs, 1% of the norm):
    # neither guard on the reference stops the widening, but the allowance per element is
    # the reference's 99.9th percentile, not its largest error: 1% off everywhere fails
    g = torch.Generator().manual_seed(5)
    truth = torch.randn(512, 512, dtype=torch.float64, generator=g)
    ref = truth.float()
    flat = ref.view(-1)
    flat[torch.randperm(flat.numel(), generator=g)[:100]] += 0.5
    out = (truth * (1 + 0.01 * torch.randn(512, 512, dtype=torch.float64, generator=g))).float()
    assert not within_reference_error(out, ref, truth, 1e-4, 1e-4)["ok"]


def test_an_error_large_only_where_the_outputs_are_large_allows_nothing_where_they_are_small():
    # exp of an input the reference first rounds to 1/2048: 0.1% off everywhere, in proportion
    # to each output (3e-4 .. 3e3); the largest errors are units, the smallest outputs tiny
    g = torch.Generator().manual_seed(5)
    x = torch.rand(256, 512, generator=g) * 4 - 2
    ref = torch.exp(4 * ((x + 4096.0) - 4096.0))
    truth = torch.exp(4 * ((x.double() + 4096.0) - 4096.0))
    exact = torch.exp(4 * x)
    assert within_reference_error(exact, ref, truth, 1e-4, 1e-4)["ok"]
    dropped = torch.where(exact < 3, torch.zeros_like(exact), exact)   # 57% of them
    r = within_reference_error(dropped, ref, truth, 1e-4, 1e-4)
    assert not r["ok"]
    # outputs far below the reference's typical error (0.3 here), each dropped: 17x atol
    # wrong, and the 99.9th percentile of all the reference's errors (its largest outputs')
    # covered them; the allowance is now taken among outputs of their own size
    few = torch.where(exact < 1.7e-3, torch.zeros_like(exact), exact)
    assert 0.05 < float((few != exact).float().mean()) < 0.15      # a tenth
    r = within_reference_error(few, ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "among outputs of about their size" in r["msg"], r["msg"]


@pytest.mark.gpu
def test_the_allowance_by_size_is_taken_on_the_gpu():
    """The by-size allowance's table is made on the CPU; the outputs it is read for lie on
    the GPU (a CPU table indexed by a GPU index raised, and the job ended as the candidate's
    runtime error)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (run on the GPU machine)")
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(256, 512, generator=g) * 4 - 2).cuda()
    ref = torch.exp(4 * ((x + 4096.0) - 4096.0))
    truth = torch.exp(4 * ((x.double() + 4096.0) - 4096.0))
    exact = torch.exp(4 * x.double()).float()
    assert within_reference_error(exact, ref, truth, 1e-4, 1e-4)["ok"]
    few = torch.where(exact < 1.7e-3, torch.zeros_like(exact), exact)
    r = within_reference_error(few, ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "among outputs of about their size" in r["msg"], r["msg"]


def test_int64_outputs_are_exact_beyond_what_a_double_holds():
    # 3x + 1 near 2^62 rounded to 53 bits (what a double computation gives): off by up to 512,
    # and cast to float64 both sides are one double
    x = torch.randint(-(2 ** 61), 2 ** 61, (4096,), dtype=torch.int64)
    ref = x * 3 + 1
    rounded = ref.double().long()
    assert not torch.equal(rounded, ref)
    r = compare(rounded, ref, 0.0, 0.0)
    assert not r["ok"] and r["mismatches"] == int((rounded != ref).sum()) and r["abs"] >= 1
    assert compare(ref.clone(), ref, 0.0, 0.0)["ok"]


def test_the_reference_error_sample_keeps_no_chunk_of_the_output(monkeypatch):
    # the quantile's sample is every step-th error: a strided view of a chunk's float64 errors
    # keeps the whole chunk, and every chunk of an output of billions of elements together is
    # a second float64 copy of it beside the float64 reference
    monkeypatch.setattr(cmp, "CPU_CHUNK", 4096)
    monkeypatch.setattr(cmp, "QUANTILE_SAMPLE", 64)
    x, w, truth, ref = conv_like(6)
    other = sum(truncated(x[:, i:i + 64]) @ truncated(w[i:i + 64]) for i in range(0, 576, 64))
    held = []
    cat = torch.cat

    def spy(tensors, *a, **k):
        held.append(sum(t.untyped_storage().nbytes() for t in tensors))
        return cat(tensors, *a, **k)
    monkeypatch.setattr(torch, "cat", spy)
    r = within_reference_error(other, ref, truth, 1e-4, 1e-4)
    assert "widened" in r
    sampled = 8 * (truth.numel() // (truth.numel() // 64) + 1)
    assert held and held[0] <= 2 * sampled, (held[0], sampled)


def test_a_scaled_atol_says_what_it_was_scaled_from():
    """The verdict's header states atol as given (1e-4); a mismatch on outputs of rms 0.5
    says the atol it used and why it is smaller."""
    import torch
    from stitchcuda_lab.verifier.compare import compare
    ref = torch.full((1000,), 0.5)
    out = ref.clone()
    out[:10] += 0.01
    msg = compare(out, ref, 1e-4, 1e-4)["msg"]
    assert "atol=5e-05: 0.0001 x the reference's root mean square 0.5" in msg, msg
    big = compare(out * 4, ref * 4, 1e-4, 1e-4)["msg"]   # rms 2: atol as given
    assert "atol=0.0001," in big, big


def test_a_few_widened_elements_with_huge_outputs_are_no_tail_of_the_references_error():
    """exp(4((x + 4096) - 4096)): the reference rounds x on its way through 4096, 0.1% off in
    proportion to each output. Widened at a few places (x2), exp there is 1e4 times the rest,
    so the reference's largest absolute error is far beyond its typical one, while relative
    to each element's size it is the same 0.1%: a program that computes exp(4x) exactly is as
    right there as anywhere, and passes."""
    from stitchcuda_lab.verifier.compare import within_reference_error
    torch.manual_seed(0)
    x = torch.rand(512, 1024) * 4.0 - 2.0
    x.view(-1)[torch.randint(0, x.numel(), (9,))] *= -2.0
    ref = torch.exp(4.0 * ((x + 4096.0) - 4096.0))
    truth = torch.exp(4.0 * ((x.double() + 4096.0) - 4096.0))
    exact = torch.exp(4.0 * x.double()).float()
    assert within_reference_error(exact, ref, truth, 1e-4, 1e-4)["ok"]
    # a tie decided otherwise is still a tail: its error is large both ways
    y = torch.rand(1000, dtype=torch.float64)
    ref = (y + torch.randn(1000, dtype=torch.float64) * 1e-9).float()
    ref[7] = 1.0 - float(y[7])
    assert not within_reference_error(y.float(), ref, y, 1e-4, 1e-4)["ok"]


def _decayed_states(seed: int, dtype=torch.float32, blocked: bool = False):
    """A state-space model's chunk states (Mamba2's SSD): a scan of random decays, exp of its
    differences (up to e^20), then a sum over the chunk of terms that cancel. ``blocked`` sums
    the scan in another order (blocks of 8, then their offsets), as a scan kernel does."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(2048, 64, generator=g, dtype=torch.float64).to(dtype)
    b = torch.randn(2048, 64, 16, generator=g, dtype=torch.float64).to(dtype)
    x = torch.rand(2048, 64, 32, generator=g, dtype=torch.float64).to(dtype)
    if blocked:
        part = a.view(2048, 8, 8).cumsum(-1)
        scan = (part + (part[..., -1].cumsum(-1) - part[..., -1])[..., None]).view(2048, 64)
    else:
        scan = a.cumsum(-1)
    return torch.einsum("bln,bl,blp->bpn", b, torch.exp(scan[:, -1:] - scan), x)


def test_a_scan_summed_in_another_order_passes_where_the_references_errors_have_a_tail():
    truth = _decayed_states(0, torch.float64)
    ref, out = _decayed_states(0), _decayed_states(0, blocked=True)
    assert not compare(out, ref, 1e-4, 1e-4)["ok"]     # hundreds of elements apart
    r = within_reference_error(out, ref, truth, 1e-4, 1e-4)
    assert r["ok"], r["msg"]
    assert "misses its float64 computation on" in r["widened"]


def test_where_the_references_errors_have_a_tail_more_misses_than_its_own_fail():
    truth = _decayed_states(0, torch.float64)
    ref = _decayed_states(0)
    own = int(((ref.double() - truth).abs() > 1e-4 + 1e-4 * truth.abs()).sum())
    assert own > 100   # the case above: the reference misses float64 on some elements
    g = torch.Generator().manual_seed(1)
    out = truth.clone().view(-1)
    hit = torch.randperm(out.numel(), generator=g)[:3 * own]
    out[hit] *= 1.001          # exact but for 0.1% on three times as many elements
    r = within_reference_error(out.view_as(truth).float(), ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "a few errors far above its typical one" in r["msg"], r["msg"]
    assert f"the reference on {own}" in r["msg"]
    out = truth.clone().view(-1)
    out[hit[:own]] *= 1.001    # as many as the reference: passes
    assert within_reference_error(out.view_as(truth).float(), ref, truth, 1e-4, 1e-4)["ok"]


def test_where_the_references_errors_have_a_tail_one_cancellations_miss_does_not_decide():
    """At a cancellation (an output near 0 among large terms) any order's error is large
    against the output, and that one element makes the norm of the errors relative to each
    element's size: another order missing there by 16x the reference's miss (the ratio reached
    16-20x in 700 draws of the problem, the reference's cumsum against a scan in blocks of 8) is
    no less right, and passes. Zeroed outputs of a few times the reference's typical error,
    fewer than the misses allowed by count and too small for the norm, fail on their size."""
    from stitchcuda_lab.verifier.compare import TAIL_MISS_SIZE, within_reference_error
    truth = _decayed_states(0, torch.float64)
    ref = _decayed_states(0)
    b, err = truth.view(-1), (ref.double() - truth).view(-1)
    typical = float(err.square().mean().sqrt())
    rel = err.abs() / (b.abs() + typical)
    worst = int(rel.argmax())
    assert float(rel[worst]) * 16 < TAIL_MISS_SIZE    # a miss of rounding's size, not an output's
    out = (truth + err.view_as(truth)).view(-1).clone()
    out[worst] = b[worst] + 16 * err[worst]
    r = within_reference_error(out.view_as(truth).float(), ref, truth, 1e-4, 1e-4)
    assert r["ok"], r["msg"]
    own = int((err.abs() > 1e-4 + 1e-4 * b.abs()).sum())
    out = truth.clone().view(-1)
    small = torch.nonzero((b.abs() > typical) & (b.abs() < 4 * typical)).view(-1)
    out[small[::small.numel() // (own // 4)][:own // 4]] = 0.0   # a quarter as many as it misses
    r = within_reference_error(out.view_as(truth).float(), ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and re.search(r"largest miss 0\.[5-9]\d* of its element's size", r["msg"]), \
        r["msg"]
    # a fifth as many each 45% off: under the bound on each, not in how many are that far off
    out = truth.clone().view(-1)
    out[small[::small.numel() // (own // 5)][:own // 5]] *= 0.55
    r = within_reference_error(out.view_as(truth).float(), ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and re.search(r"largest miss 0\.[34]\d* .*misses over 0\.1 of that "
                                     r"\(at most 4\)", r["msg"]), r["msg"]
    # an infinity where the float64 result is a number misses by all of it
    out = (truth + err.view_as(truth)).view(-1).clone()
    out[worst] = math.inf
    r = within_reference_error(out.view_as(truth).float(), ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and "largest miss inf" in r["msg"], r["msg"]


def normalised_means(seed: int = 0):
    """The mean over each sample of its group-normalised values: 0 in exact arithmetic, so the
    fp32 reference is all rounding noise (KernelBench's Conv3d_GroupNorm_Mean)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 8, 4096, generator=g) * 3 + 1

    def forward(x):
        return torch.nn.functional.group_norm(x, 4).mean(dim=(1, 2))
    return x, forward(x), forward(x.double())


def test_an_output_that_is_rounding_noise_is_judged_by_its_distance_from_float64():
    x, ref, truth = normalised_means()
    assert truth.abs().max() < 1e-15 and ref.abs().max() > 1e-9
    # the same arithmetic in another order (the sums split): other noise, as near float64
    xg = x.view(64, 4, -1)

    def running(v):
        # four running fp32 sums per group, as a plain C loop takes them: its noise is 1-6x
        # the reference's (whose sums are blocked and vectorised)
        parts = torch.zeros(64, 4, 4)
        for j in range(0, v.shape[-1], 4):
            parts += v[..., j:j + 4]
        return parts.sum(-1, keepdim=True)
    mu = running(xg) / xg.shape[-1]
    y = (xg - mu) * torch.rsqrt(running((xg - mu) ** 2) / xg.shape[-1] + 1e-5)
    other = running(y).sum((1, 2)) / xg[0].numel()
    assert not compare(other, ref, 1e-4, 1e-4)["ok"]
    r = within_reference_error(other, ref, truth, 1e-4, 1e-4)
    assert r["ok"], r["msg"]
    assert "rounding noise" in r["widened"]
    # one running sum, the plainest loop (20-30x the reference's noise here), passes too
    one = x.view(64, 4, -1)
    sums = torch.zeros(64, 4)
    mus = torch.zeros(64, 4, 1)
    for j in range(one.shape[-1]):
        mus += one[..., j:j + 1]
    mu = mus / one.shape[-1]
    y = (one - mu) * torch.rsqrt(((one - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
    for j in range(one.shape[-1]):
        sums += y[..., j]
    plain = sums.sum(-1) / x[0].numel()
    r = within_reference_error(plain, ref, truth, 1e-4, 1e-4)
    assert r["ok"] and r["noise"] and r["rel"] > 5, r["msg"]
    # the exact result, 0, is right
    assert within_reference_error(torch.zeros_like(ref), ref, truth, 1e-4, 1e-4)["ok"]


def test_noise_allows_nothing_beyond_the_arithmetics_own():
    x, ref, truth = normalised_means(1)
    y = torch.nn.functional.group_norm(x, 4)
    for narrow in (torch.float16, torch.bfloat16):   # the normalised values rounded to it
        r = within_reference_error(y.to(narrow).float().mean(dim=(1, 2)), ref, truth, 1e-4,
                                   1e-4)
        assert not r["ok"] and r["reason"] == "output_mismatch" and "rounding noise" in r["msg"]
    # an offset of a hundred times the noise, in every element or one
    assert not within_reference_error(ref + 100 * ref.abs().max(), ref, truth, 1e-4, 1e-4)["ok"]
    one = ref.clone()
    one[3] = 100 * ref.abs().max()
    assert not within_reference_error(one, ref, truth, 1e-4, 1e-4)["ok"]
    nan = ref.clone()
    nan[5] = float("nan")
    assert not within_reference_error(nan, ref, truth, 1e-4, 1e-4)["ok"]


def test_a_discrete_choice_on_an_exact_zero_is_no_noise_allowance():
    """A reference off by a threshold decided otherwise on a few elements whose float64
    result is 0: its errors are no rounding noise, and their size allows nothing elsewhere."""
    truth = torch.zeros(10_000, dtype=torch.float64)
    ref = torch.zeros(10_000)
    ref[::100] = 1.0                      # 1% of the elements, by 1
    out = ref.clone()
    out[1::100] = 3.0                     # others, by 3
    r = within_reference_error(out, ref, truth, 1e-4, 1e-4)
    assert not r["ok"] and not r.get("noise")


def test_an_infinite_reference_is_met_only_by_the_same_infinity():
    """|out - inf| is inf, and so is the bound atol + rtol * |inf|: any number but NaN was
    within it (a kernel writing 0 where exp overflows passed)."""
    ref = torch.tensor([1.0, float("inf"), float("-inf"), 2.0])
    assert compare(ref.clone(), ref, 1e-4, 1e-4)["ok"]
    for bad in ([1.0, 0.0, float("-inf"), 2.0], [1.0, float("inf"), float("inf"), 2.0],
                [1.0, 3.4e38, float("-inf"), 2.0], [1.0, float("nan"), float("-inf"), 2.0]):
        assert not compare(torch.tensor(bad), ref, 1e-4, 1e-4)["ok"], bad
    assert not within_reference_error(torch.tensor([1.0, 0.0, float("-inf"), 2.0]), ref,
                                      ref.double(), 1e-4, 1e-4)["ok"]


def test_small_values_dropped_under_an_atol_the_largest_values_keep_are_a_mismatch():
    """exp of wide logits: a few outputs near 1e38 keep atol at 1e-4 for every element, and a
    program that writes 0 for each output below 1e-4 (38% of them) is within it everywhere;
    more than 2% of the elements above the output's noise off by ten times rtol of themselves is
    still a mismatch. An honest exp whose denormals are flushed to zero passes, as do a sum whose
    results near zero carry its rounding, a sigmoid written through tanh and exact zeros that
    are rounding noise in either order."""
    from stitchcuda_lab.verifier.compare import compare
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 96, generator=g) * 32.0
    ref = torch.exp(x)
    dropped = torch.where(x < -9.3, torch.zeros_like(ref), ref)
    r = compare(dropped, ref, 1e-4, 1e-4)
    assert not r["ok"] and r["reason"] == "output_mismatch" and "above its noise" in r["msg"], r
    assert compare(dropped, ref, 1e-4, 1e-4, far=False)["ok"]   # a widened draw's comparison
    flushed = torch.where(ref < torch.finfo(torch.float32).tiny, torch.zeros_like(ref), ref)
    assert 0 < int((flushed != ref).sum()) < 0.02 * ref.numel()
    assert compare(flushed, ref, 1e-4, 1e-4)["ok"]
    rows = torch.randn(4096, 64, generator=g, dtype=torch.float64)
    assert compare(rows.sum(1).float(), rows.float().flip(1).sum(1), 1e-4, 1e-4)["ok"]
    # wider logits: more denormals, flushed by a fast-math exp (not counted: below the normals)
    wide = torch.exp(torch.randn(256, 256, generator=g) * 64.0)
    ftz = torch.where(wide < torch.finfo(torch.float32).tiny, torch.zeros_like(wide), wide)
    assert compare(ftz, wide, 1e-4, 1e-4)["ok"]
    # a sigmoid through tanh: no relative precision left in its tiniest outputs, whose root
    # mean square under 1 scales atol instead
    z = torch.randn(512, 512, generator=g) * 8.0
    assert compare(0.5 * torch.tanh(z / 2) + 0.5, torch.sigmoid(z), 1e-4, 1e-4)["ok"]
    # exact zeros of exact arithmetic (a tenth of the outputs), rounding noise of another
    # order in each: below the output's noise floor, not counted
    c = torch.randn(256, 256, generator=g) * 50.0
    zeros = torch.rand(256, 256, generator=g) < 0.1
    noise = [(torch.rand(256, 256, generator=g) - 0.5) * 2e-6 for _ in range(2)]
    assert compare(torch.where(zeros, noise[0], c), torch.where(zeros, noise[1], c),
                   1e-4, 1e-4)["ok"]
