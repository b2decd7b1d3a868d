"""The rubric: rule scores from the Verifier's facts and the candidate's source; reward tiers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from stitchcuda_lab.agents import rubric
from stitchcuda_lab.candidate import Candidate, KernelSource
from stitchcuda_lab.verdict import Verdict

GOOD_PROGRAM = textwrap.dedent('''
    import torch
    import torch.nn as nn
    from stitchcuda_lab import runtime

    k = runtime.load(SOURCES["softmax_row"], lang=LANGS["softmax_row"], name="softmax_row")


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            x = x.contiguous()
            out = torch.empty_like(x)
            rows, cols = x.shape
            k.launch("softmax_row", grid=(rows, 1, 1), block=(256, 1, 1), args=(x, out, cols))
            return out
''')

GOOD_CUDA = r'''
extern "C" __global__ void softmax_row(const float* __restrict__ x, float* __restrict__ out,
                                       long long cols) {
    __shared__ float red[32];
    const float4* x4 = reinterpret_cast<const float4*>(x + blockIdx.x * cols);
    float m = -INFINITY;
    for (long long i = threadIdx.x; i < cols / 4; i += blockDim.x) {
        float4 v = x4[i];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    /* ... sum and normalise the same way ... */
}
'''

NAIVE_CUDA = r'''
extern "C" __global__ void softmax_row(const float* x, float* out, long long cols) {
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(out, expf(x[i]));
}
'''


def cand(program=GOOD_PROGRAM, code=GOOD_CUDA, lang="cuda", replaced=("aten._softmax.default",),
         kept=(), name="softmax_row") -> Candidate:
    return Candidate(program=program, kernels=[KernelSource(name, lang, code, [name])],
                     replaced=list(replaced), kept=list(kept), origin="claude")


def passed(**kw) -> Verdict:
    base = {"status": "pass", "correct": True, "speedup_vs_eager": 1.3,
            "speedup_vs_compile": 1.1, "aten_ops": {"aten.empty_like.default": 5}}
    base.update(kw)
    return Verdict(**base)


# --- reward -------------------------------------------------------------------------------

@pytest.mark.parametrize("verdict,tier", [
    (Verdict(status="incorrect"), -1),
    (Verdict(status="rejected", reason="replaced_op_ran"), -1),
    (Verdict(status="build_error"), -1),
    (Verdict(status="pass", correct=False), -1),
    (Verdict(status="pass", correct=True), 1),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.05), 1),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.06), 2),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.5, speedup_vs_compile=0.9), 2),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.5, speedup_vs_compile=1.05), 2),
    (Verdict(status="pass", correct=True, speedup_vs_eager=1.5, speedup_vs_compile=1.06), 3),
])
def test_reward_tiers(verdict, tier):
    assert rubric.reward(verdict) == tier
    assert rubric.reward(verdict.to_dict()) == tier


# --- scores -------------------------------------------------------------------------------

def test_a_clean_fused_cuda_reduction_scores_full_marks():
    s = rubric.score(cand(), passed(), reference_ops=["aten._softmax.default"])
    for name in rubric.CRITERIA:
        assert s[name]["score"] == 1.0, (name, s[name]["reasons"])
    assert s["reward"] == 3 and s["correct"] is True and s["overall"] == 1.0
    assert "warp-shuffle reduction" in s["cuda_engineering"]["reasons"]


def test_naive_kernel_loses_engineering_points_with_reasons():
    s = rubric.score(cand(code=NAIVE_CUDA), passed())["cuda_engineering"]
    assert s["score"] == 0.0
    reasons = " | ".join(s["reasons"])
    for why in ("no grid-stride loop", "scalar memory access only", "not __restrict__",
                "per-element atomics", "reduction without warp shuffles",
                "reduction without shared memory"):
        assert why in reasons


def test_pointwise_kernel_is_not_asked_for_reductions():
    code = r'''extern "C" __global__ void f(const float4* __restrict__ x, float4* __restrict__ y,
        long long n) { for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
        i += blockDim.x * gridDim.x) { y[i] = x[i]; } }'''
    s = rubric.score(cand(code=code, replaced=["aten.relu.default"]), passed())
    assert s["cuda_engineering"]["score"] == 1.0
    assert not any("reduction" in r for r in s["cuda_engineering"]["reasons"])


def test_c_kernels_are_judged_on_openmp_simd_restrict():
    good = """void f(const float* restrict x, float* restrict y, long long n) {
        #pragma omp parallel for simd
        for (long long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0; }"""
    bad = """void f(const float* x, float* y, long long n) {
        for (long long i = 0; i < n; ++i) {
        #pragma omp critical
        y[0] += x[i]; } }"""
    assert rubric.score(cand(code=good, lang="c", replaced=["aten.relu.default"]),
                        passed())["cuda_engineering"]["score"] == 1.0
    s = rubric.score(cand(code=bad, lang="c", replaced=["aten.relu.default"]), passed())
    assert s["cuda_engineering"]["score"] == 0.0
    assert "omp atomic/critical in the loop" in s["cuda_engineering"]["reasons"]


def test_no_kernels_scores_zero_engineering():
    c = Candidate(program=GOOD_PROGRAM, kernels=[])
    assert rubric.score(c, passed())["cuda_engineering"] == {"score": 0.0,
                                                             "reasons": ["no own kernels"]}


# --- anti-hacking -------------------------------------------------------------------------

def test_a_candidate_that_never_built_earns_no_engineering_or_coverage():
    broken = Verdict(status="build_error", reason="build_error: nvrtc failed",
                     build_log="error: expected a ';'")
    s = rubric.score(cand(), broken, reference_ops=["aten._softmax.default"])
    assert s["cuda_engineering"]["score"] == 0.0 and "never built" in \
        s["cuda_engineering"]["reasons"][0]
    assert s["coverage"]["score"] == 0.0 and s["reward"] == -1
    # the same code, built and run, scores on its merits
    ok = rubric.score(cand(), passed(), reference_ops=["aten._softmax.default"])
    assert ok["cuda_engineering"]["score"] == 1.0 and ok["coverage"]["score"] == 1.0


@pytest.mark.parametrize("status", ["runtime_error", "timeout"])
def test_a_candidate_whose_forward_never_ran_covers_nothing(status):
    s = rubric.score(cand(), Verdict(status=status), reference_ops=["aten._softmax.default"])
    assert s["coverage"]["score"] == 0.0 and status in s["coverage"]["reasons"][0]
    assert s["cuda_engineering"]["score"] > 0.0      # it built: the code is judged


def _forward(body: str) -> str:
    return GOOD_PROGRAM.replace('''        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        k.launch("softmax_row", grid=(rows, 1, 1), block=(256, 1, 1), args=(x, out, cols))
        return out''', textwrap.indent(textwrap.dedent(body), " " * 8).rstrip())


@pytest.mark.parametrize("body,why", [
    ('''
     if getattr(self, "_out", None) is not None:
         return self._out
     self._out = torch.empty_like(x)
     k.launch("softmax_row", grid=(1, 1, 1), block=(256, 1, 1), args=(x, self._out, 1))
     return self._out''', "cached result"),
    ("return x", "returns its input 'x'"),
    ('''
     ref = Model()
     return ref(x)''', "uses the reference Model"),
])
def test_hacks_in_the_source_zero_anti_hacking_and_the_reward(body, why):
    s = rubric.score(cand(program=_forward(body)), passed())
    assert s["anti_hacking"]["score"] == 0.0
    assert any(why in r for r in s["anti_hacking"]["reasons"])
    assert s["reward"] == -1          # never rewarded, even with a passing verdict


def test_verifier_rejection_and_replaced_ops_that_ran():
    s = rubric.score(cand(), Verdict(status="rejected", reason="output aliases input"))
    assert s["anti_hacking"]["score"] == 0.0
    assert "Verifier rejected it: output aliases input" in s["anti_hacking"]["reasons"]
    s = rubric.score(cand(), passed(aten_ops={"aten._softmax.default": 5}))
    assert s["anti_hacking"]["score"] == 0.0
    assert "torch fallback for replaced ops: _softmax" in s["compliance"]["reasons"]
    assert s["coverage"]["score"] == 0.0


def test_suspicious_speedup_is_flagged_not_zeroed():
    s = rubric.score(cand(), passed(flags=["speedup_over_10x"], speedup_vs_eager=42.0))
    assert s["anti_hacking"]["score"] == 0.5
    assert s["reward"] == 3


def test_threads_and_streams_are_suspicious():
    program = GOOD_PROGRAM.replace("import torch\n", "import torch\nimport threading\n")
    s = rubric.score(cand(program=program), passed())
    assert s["anti_hacking"]["score"] == 0.3
    assert s["compliance"]["score"] < 1.0


# --- compliance ---------------------------------------------------------------------------

def test_disallowed_imports_and_unloaded_kernels():
    program = GOOD_PROGRAM.replace("import torch\n", "import torch\nimport numpy as np\n")
    program = program.replace('SOURCES["softmax_row"]', 'SOURCES["other"]')
    s = rubric.score(cand(program=program), passed())["compliance"]
    assert "imports outside torch/math/runtime: numpy" in s["reasons"]
    assert "kernels never loaded through runtime.load: softmax_row" in s["reasons"]
    assert s["score"] == pytest.approx(0.5)


def test_torch_call_for_a_replaced_op_is_a_fallback():
    program = GOOD_PROGRAM.replace("return out", "return torch.softmax(x, dim=-1)")
    s = rubric.score(cand(program=program), passed())["compliance"]
    assert "torch fallback for replaced ops: _softmax" in s["reasons"]


def test_missing_model_new_or_broken_source_scores_zero():
    s = rubric.score(cand(program=GOOD_PROGRAM.replace("ModelNew", "Other")), passed())
    assert s["compliance"] == {"score": 0.0, "reasons": ["no ModelNew class"]}
    s = rubric.score(cand(program="class ModelNew(:\n"), passed())
    assert s["compliance"]["score"] == 0.0
    assert s["compliance"]["reasons"][0].startswith("program does not parse (line 1")


def test_load_inline_candidates_are_compliant():
    program = textwrap.dedent('''
        import torch
        from torch.utils.cpp_extension import load_inline

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return ext.relu(x)
    ''')
    c = Candidate(program=program, kernels=[], replaced=[])
    assert rubric.score(c, passed())["compliance"]["score"] == 1.0


# --- coverage -----------------------------------------------------------------------------

def test_coverage_is_the_share_of_reference_compute_ops():
    c = cand(replaced=["aten.add.Tensor", "aten.gelu.default", "aten.mul.Tensor"],
             kept=["aten.mm.default"])
    ref = ["aten.mm.default", "aten.add.Tensor", "aten.gelu.default", "aten.mul.Tensor",
           "aten.view.default"]
    s = rubric.score(c, passed(), reference_ops=ref)["coverage"]
    assert s["score"] == 0.75
    assert s["reasons"] == ["3 of 4 compute ops in own kernels (add, gelu, mul)",
                            "left to the library: mm"]


def test_coverage_without_reference_ops_uses_what_ran():
    c = cand(replaced=["aten.relu.default"], kept=[])
    v = passed(aten_ops={"aten.addmm.default": 5, "aten.empty_like.default": 5})
    assert rubric.score(c, v)["coverage"]["score"] == 0.5


# --- judge --------------------------------------------------------------------------------

def test_judge_can_lower_anti_hacking_but_not_raise_it():
    rules = rubric.score(cand(), passed())
    judge = {"anti_hacking": {"score": 0.0, "reason": "special-cases the batch size"},
             "cuda_engineering": {"score": 0.5, "reason": "ok"},
             "coverage": {"score": 1.0, "reason": "all"},
             "compliance": {"score": 1.0, "reason": "fine"}}
    merged = rubric.merge_judge(rules, judge)
    assert merged["anti_hacking"]["score"] == 0.0
    assert merged["anti_hacking"]["reasons"][-1] == "judge (0.00): special-cases the batch size"
    assert merged["cuda_engineering"]["score"] == 0.75
    assert merged["reward"] == -1 and merged["judge"] is judge

    hacked = rubric.score(cand(program=_forward("return x")), passed())
    lenient = rubric.merge_judge(hacked, {"anti_hacking": {"score": 1.0, "reason": "fine"}})
    assert lenient["anti_hacking"]["score"] == 0.0 and lenient["reward"] == -1


def test_scores_accept_dicts_and_are_json():
    import json
    s = rubric.score(cand().to_dict(), passed().to_dict())
    assert json.loads(json.dumps(s)) == s


def test_rubric_imports_no_torch():
    code = ("import sys, stitchcuda_lab.agents.rubric as r; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert out.stdout.strip() == "ok", out.stderr


# --- grade: what a Session does with every verdict -----------------------------------------

class Judge:
    def __init__(self, reply=None, error=None):
        self.reply, self.error, self.seen = reply, error, {}

    def score(self, candidate, verdict, *, problem=None, reference_ops=None):
        self.seen.update(problem=problem, reference_ops=reference_ops)
        if self.error is not None:
            raise self.error
        return self.reply


def test_grade_fills_the_rule_scores_and_the_reward():
    v = passed()
    rubric.grade(cand(), v, reference_ops=["aten._softmax.default"])
    assert v.rubric == rubric.score(cand(), passed(), reference_ops=["aten._softmax.default"])
    assert v.reward == 3


def test_grade_takes_the_judges_scores_when_there_is_one():
    v, judge = passed(), Judge({"overall": 0.5, "reward": 2})
    rubric.grade(cand(), v, reference_ops=["aten.mm.default"], reviewer=judge, problem="p")
    assert v.rubric == {"overall": 0.5, "reward": 2} and v.reward == 2
    assert judge.seen == {"problem": "p", "reference_ops": ["aten.mm.default"]}


def test_a_failing_judge_keeps_the_rule_scores():
    from stitchcuda_lab.errors import ServiceError
    v = passed()
    rubric.grade(cand(), v, reviewer=Judge(error=ServiceError("overloaded")))
    assert v.rubric["judge_error"] == "overloaded" and v.reward == 3


def test_a_bug_in_the_rules_keeps_the_verdict_with_the_error(monkeypatch):
    def broken(*args):
        raise ZeroDivisionError("a rule's bug")
    monkeypatch.setattr(rubric, "_engineering", broken)
    v = passed()
    rubric.grade(cand(), v, reviewer=Judge({"reward": 0}))
    assert v.rubric == {"error": "ZeroDivisionError: a rule's bug"} and v.reward == 3


def test_reference_ops_are_the_graphs_compute_nodes():
    from types import SimpleNamespace as NS
    graph = NS(nodes=[NS(op="placeholder", op_class="input", target="x"),
                      NS(op="call_function", op_class="data_movement", target="aten.view.default"),
                      NS(op="call_function", op_class="pointwise", target="aten.relu.default")])
    assert rubric.reference_ops(graph) == ["aten.relu.default"]
    assert rubric.reference_ops(None) is None
