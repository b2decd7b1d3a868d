import pytest

from stitchcuda_lab.errors import PlanError, UsageError
from stitchcuda_lab.candidate import Candidate, KernelSource
from stitchcuda_lab.plan import Plan, Task
from stitchcuda_lab.verdict import TrialResult, Verdict


def _candidate():
    return Candidate(program="import torch\n", kernels=[KernelSource("k0", "c", "void k0(void){}")],
                     replaced=["aten.relu.default"], kept=["aten.mm.default"])


def test_plan_round_trips_through_json():
    p = Plan(tasks=[Task(id="t1", kind="pointwise_fusion", ops=["add", "relu"], share=0.4,
                         refs=["fusion-rules"], params={"block": 256})], notes=["n"])
    q = Plan.from_json(p.to_json())
    assert q == p and isinstance(q.tasks[0], Task)


def test_candidate_and_verdict_round_trip():
    c = _candidate()
    assert Candidate.from_json(c.to_json()) == c
    v = Verdict(status="pass", correct=True, trials=[TrialResult(seed=42, ok=True)],
                timings={"eager": 2.0, "ours": 1.0}, speedup_vs_eager=2.0)
    assert Verdict.from_json(v.to_json()) == v


def test_candidate_id_is_its_content_hash():
    a, b = _candidate(), _candidate()
    assert a.id == b.id
    edited = a.with_kernel("k0", "void k0(void){ /* edited */ }")
    assert edited.id != a.id and edited.parent == a.id and edited.origin == "user"


def test_editing_an_unknown_kernel_names_the_known_ones():
    with pytest.raises(UsageError, match="k0"):
        _candidate().with_kernel("nope", "")


def test_module_source_is_one_self_contained_file():
    src = _candidate().module_source()
    ns: dict = {}
    exec(compile(src, "<candidate>", "exec"), ns)
    assert ns["SOURCES"]["k0"] == "void k0(void){}" and ns["LANGS"] == {"k0": "c"}


def test_unknown_task_kind_is_a_plan_error():
    with pytest.raises(PlanError, match="unknown task kind"):
        Task(id="t1", kind="magic")


def test_objects_render_short_text_and_html():
    plan = Plan(tasks=[Task(id="t1", kind="keep", ops=["mm"], reason="cuBLAS wins")])
    v = Verdict(status="rejected", reason="pytorch_fallback: aten.relu ran",
                profile={"candidate": [{"name": "x"}] * 500})
    for obj, needle in ((plan, "cuBLAS wins"), (v, "pytorch_fallback"), (_candidate(), "k0")):
        bundle = obj._repr_mimebundle_()
        assert needle in bundle["text/plain"] and needle in bundle["text/html"]
        assert len(bundle["text/plain"]) < 400      # no dataclass dump of the profile


def test_blockers_name_the_computing_ops_a_plan_keeps_with_their_reason():
    plan = Plan(tasks=[
        Task(id="t1", kind="pointwise_fusion", ops=["relu"], targets=["aten.relu.default"]),
        Task(id="t2", kind="keep", ops=["conv"], targets=["aten.conv2d.default"],
             reason="conv2d: GEMM/convolution stays in the vendor library"),
        Task(id="t3", kind="keep", ops=["cumsum"], targets=["aten.cumsum.default"],
             reason="cumsum: no kernel template"),
        Task(id="t4", kind="keep", ops=["flip"], targets=["aten.view.default"],
             reason="view: moves no data")])
    assert plan.blockers() == ["cumsum: no kernel template"]


def test_an_offline_plan_refuses_a_launch_knob_out_of_its_range():
    """A person's `"chunk": -5` built a kernel that wrote nothing, and the verdict blamed the
    kernel; the plan now names the knob. An LLM coder's params are its own (vec 8 there)."""
    from stitchcuda_lab.errors import PlanError
    from stitchcuda_lab.plan import Plan, Task

    def plan(agent: str, **params) -> Plan:
        return Plan(agent=agent, tasks=[Task(id="t1", kind="pointwise_fusion", ops=["add"],
                                             params=params)])
    for bad in ({"chunk": -5}, {"block": 100}, {"vec": 8}, {"rows": "grid"}, {"ipt": 2.5},
                {"cache": "yes"}, {"block": True}):
        with pytest.raises(PlanError, match=f"params '{next(iter(bad))}'") as e:
            plan("offline", **bad)
        assert "leave a knob out" in e.value.hint
    assert plan("offline", chunk=4096, block=128, vec=4, ipt=2, rows="warp", cache=False,
                waves=32, unroll=2).tasks[0].params["chunk"] == 4096
    assert plan("claude", vec=8, chunk=-5).tasks[0].params["vec"] == 8
