"""The offline Planner: fusion rules over the captured graph, no network.

Grouping is greedy in graph order: every node a kernel can compute starts its own group and
joins the group of each producer when the union stays convex (no path leaves and re-enters it)
and ``build_spec`` can still turn it into one kernel. That single test covers the rules:
pointwise chains/DAGs with broadcasting, a reduction or normalisation with its prologue and
epilogue, several reductions over the same rows. Groups fed by a GEMM/convolution become
``gemm_epilogue`` tasks (the GEMM stays in the library); everything else is ``keep``, with the
reason. On CUDA, large fp32 GEMMs get a ``tensor_core_gemm`` task (the 3xTF32 split of
``runtime.gemm``), and a ``cuda_graph`` task is added when the forward is launch-bound.

>>> plan = OfflinePlanner().plan(problem, graph, settings)   # doctest: +SKIP
>>> [t.kind for t in plan.tasks]                             # doctest: +SKIP
['gemm_epilogue', 'gemm_epilogue', 'keep']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import aten
from ...graph import memory_order, mode_dependent
from ...plan import Plan, Task
from .expand import kept_in_library, node_role
from .ir import Unsupported
from .launch import default_params
from .lower import build_spec
from .helpers import contiguous_strides, node_ref
from .rewrite import SUM_OF_GEMM_NODES, draws_random, rewrite

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...graph import Graph, Node
    from ...problem import Problem
    from ...settings import Settings

LAUNCH_BOUND_US = 20.0   # eager time per kernel launch below which a CUDA graph pays
# What a graph replay saves and costs (H200, docs/PERFORMANCE.md): a launch from Python costs
# 7-9 us of host time (an eager op 7.2, one of ours 8.7); the replay copies every input into
# its static buffer and clones every output: a launch each, moving its bytes twice at ~4 TB/s.
HOST_LAUNCH_US = 7.0
COPY_BYTES_PER_US = 4.0e6
# fp32 GEMMs worth the 3xTF32 split (gemm.py): long enough K and enough work that the split's
# extra memory passes and launches are small next to the GEMM (measured on the H200:
# 1.5-2.3x at K >= 1024 and >= 17 GFLOP, slower at K = 128 or one 512-row step).
SPLIT_MIN_K = 512
SPLIT_MIN_FLOPS = 4e9
# Below SPLIT_MIN_K the split is measured, not assumed: a GEMM of that much work and a K of at
# least SPLIT_TRY_K gets the task switched off, and the refine round times it on. A short K
# over a large output (KernelBench's tall-skinny product, K = 32 and a 4 GB output) is bound
# by fp32 FMAs on the SIMT units and by the output's write; on tensor cores only the write is
# left. At K = 128 with a small output the split measured slower.
SPLIT_TRY_K = 16
SPLIT_TARGETS = ("aten.linear.default", "aten.matmul.default", "aten.mm.default",
                 "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default")


def fusion_groups(graph: Graph) -> tuple[list[list[str]], dict[str, str]]:
    """Maximal legal kernel groups (node names in graph order) and, for nodes left out, why."""
    calls = graph.calls()
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    users = graph.users()
    for a, later in memory_order(graph).items():   # an in-place write orders reads around it
        users[a] = users.get(a, []) + later
    why: dict[str, str] = {}
    group_of: dict[str, int] = {}
    groups: dict[int, list[str]] = {}
    next_id = 0
    for n in calls:
        if n.name in group_of:     # an item taken with its tuple
            continue
        if node_role(n, graph) is None:
            why[n.name] = _why_not(n)
            continue
        gid = next_id
        next_id += 1
        # a tuple result (min/max over a dim: values and indices) comes with all its items:
        # no group can hold the tuple and leave an item to another
        items = users.get(n.name, [])
        tuple_items = [u for u in items if u != "output" and graph.node(u).target == "getitem"]
        groups[gid] = [n.name] + (tuple_items if len(tuple_items) == len(items) else [])
        for m in groups[gid]:
            group_of[m] = gid
        for p in n.inputs():
            pg = group_of.get(p)
            g = group_of[n.name]
            if pg is None or pg == g:
                continue
            merged = sorted(groups[pg] + groups[g], key=order.get)
            if not _convex(set(merged), users, order):
                continue
            try:
                build_spec(graph, merged)
            except Unsupported:
                continue
            for m in groups[g]:
                group_of[m] = pg
            groups[pg] = merged
            del groups[g]
    result = []
    for _gid, members in sorted(groups.items(), key=lambda kv: order[kv[1][0]]):
        try:
            build_spec(graph, members)
            result.append(members)
        except Unsupported as e:
            for m in members:
                n = graph.node(m)
                why[m] = _why_not(n) if node_role(n) == "view" else _unsupported(n, e)
    return result, why


def _convex(members: set[str], users: dict[str, list[str]], order: dict[str, int]) -> bool:
    """No path from a member through a non-member back into the group."""
    frontier = [u for m in members for u in users.get(m, []) if u not in members and u != "output"]
    seen: set[str] = set()
    last = max(order[m] for m in members)
    while frontier:
        u = frontier.pop()
        if u in seen or u == "output" or order.get(u, 1 << 30) > last:
            continue
        seen.add(u)
        for v in users.get(u, []):
            if v in members:
                return False
            frontier.append(v)
    return True


def _why_not(n: Node) -> str:
    """Why ``n`` stays in PyTorch, as ``"<op>: <why>"`` (the op's short name first: the
    kept-reference reason quotes it)."""
    op = n.opname
    if aten.is_library(n.target):
        return f"{op}: GEMM/convolution stays in the vendor library (cuBLAS/cuDNN, oneDNN on CPU)"
    if n.mutates or n.opname.endswith("_"):
        return f"{op}: in-place update (e.g. a counter buffer): left as PyTorch does it"
    if draws_random(n):
        return (f"{op}: draws random numbers in this mode: left to PyTorch, whose draws "
                "from the same seed are the reference's")
    if n.op_class == "data_movement":
        return f"{op}: view/layout op: moves no data or is a plain copy; left to PyTorch"
    if n.op_class == "rnn":
        return f"{op}: recurrent op: stays in the library"
    if n.op_class == "reduction":
        return f"{op}: no kernel template for this reduction; left to the library"
    return f"{op}: no kernel template; left to the library"


def _unsupported(n: Node, e: Exception) -> str:
    """The lowering's reason for ``n`` as ``"<op>: <why>"`` (it names the node, not the op)."""
    why = str(e)
    if why.startswith(f"{n.name}: "):
        why = why[len(n.name) + 2:]
    return f"{n.opname}: {why}"


def _rewritten(ops: list[str], graph: Graph) -> bool:
    """Whether a task computes or reads what the summed-weights rewrite made."""
    return any(o.endswith(SUM_OF_GEMM_NODES) or any(i.endswith(SUM_OF_GEMM_NODES)
                                                    for i in graph.node(o).inputs())
               for o in ops)


def _note_rewrites(plan: Plan, graph: Graph) -> None:
    """Say what the rewrite changed that a person would not recognise in the plan's ops."""
    for n in graph.calls():
        if n.name.endswith("_wsum"):
            gemm = n.name[:-len("_wsum")]
            plan.notes.append(f"{gemm} is only summed (or averaged) over its output features: "
                              f"its weights are summed first ({n.name}) and {gemm} computes "
                              "one column (exact algebra: the sum of the products is the "
                              "product of the sum)")


def _note_mode(plan: Plan, graph: Graph) -> None:
    """Say which modules follow the capture's training/eval mode; nothing when none does."""
    moded = mode_dependent(graph)
    if moded:
        plan.notes.append(f"captured in {'training' if graph.training else 'eval'} mode: "
                          f"{', '.join(moded)} follow{'s' if len(moded) == 1 else ''} that mode")


class OfflinePlanner:
    """Rule-based Planner (see module docstring)."""

    name = "offline"

    def plan(self, problem: Problem, graph: Graph, settings: Settings) -> Plan:
        device = "cuda" if str(graph.device).startswith("cuda") else "cpu"
        plan = Plan(device=device, agent="offline")
        graph = rewrite(graph)
        calls = graph.calls()
        _note_rewrites(plan, graph)
        total_t = sum(n.time_us or 0.0 for n in calls)
        total_b = sum(n.bytes for n in calls) or 1

        def share(names: list[str]) -> float:
            ns = [graph.node(x) for x in names]
            if total_t > 0:
                return round(sum(n.time_us or 0.0 for n in ns) / total_t, 4)
            return round(sum(n.bytes for n in ns) / total_b, 4)

        cpu_ref = ["cpu-openmp-vectorization"] if device == "cpu" else []
        if graph.capture == "none":
            plan.notes += graph.warnings
            plan.tasks.append(Task(id="t1", kind="keep", ops=[], share=1.0,
                                   technique="run the forward as PyTorch does",
                                   reason="the graph could not be captured, so no op can be "
                                          "replaced"))
            self._maybe_cuda_graph(plan, graph, device)
            return plan
        groups, why = fusion_groups(graph)
        claimed: set[str] = set()
        tid = 0
        for members in groups:
            spec = build_spec(graph, members, "k")
            libs = []
            for m in members:
                for p in graph.node(m).inputs():
                    pn = graph.node(p)
                    while pn.target == "aten.view.default" and pn.inputs():  # lifted by rewrite()
                        p = pn.inputs()[0]
                        pn = graph.node(p)
                    if pn.op == "call_function" and kept_in_library(pn, graph) \
                            and p not in claimed and p not in libs:
                        libs.append(p)
            tid += 1
            kinds = _kinds(spec)
            what = _describe(spec, graph, kinds)
            if libs:
                ops = sorted(libs + members, key=lambda x: graph.nodes.index(graph.node(x)))
                claimed.update(libs)
                lib_t = ", ".join(graph.node(x).target for x in libs)
                task = Task(id=f"t{tid}", kind="gemm_epilogue", ops=ops,
                            targets=sorted({graph.node(x).target for x in ops}),
                            share=share(ops),
                            technique=f"library {lib_t} + one fused epilogue kernel ({what})",
                            reason="the GEMM/conv stays near peak in the library; fusing what "
                                   "follows reads its output once instead of once per op",
                            refs=["gemm-epilogues", "fusion-rules"] + cpu_ref
                            + (["depthwise-convolution"] if "pool_conv" in kinds else []))
            elif spec.kind == "pool":
                task = Task(id=f"t{tid}", kind="reduction_fusion", ops=members,
                            targets=spec.targets, share=share(members), technique=what,
                            reason=_pool_reason(kinds, members, graph),
                            refs=(["depthwise-convolution"] if "pool_conv" in kinds else [])
                            + (["small-channel-convolution"] if "pool_dense" in kinds else [])
                            + ["pooling-kernels", "fusion-rules"] + cpu_ref)
            elif kinds:
                task = Task(id=f"t{tid}", kind="reduction_fusion", ops=members,
                            targets=spec.targets, share=share(members),
                            technique=what,
                            reason=f"{len(members)} ops over {spec.rows} rows of {spec.rowlen}: "
                                   "one kernel keeps each row on chip between passes instead of "
                                   "a round trip to memory per op",
                            refs=["fusion-rules", "welford-online-softmax"] + cpu_ref)
            else:
                task = Task(id=f"t{tid}", kind="pointwise_fusion", ops=members,
                            targets=spec.targets, share=share(members),
                            technique=what,
                            reason=(f"{len(members)} elementwise ops: eager reads and writes "
                                    f"{_mb(sum(graph.node(m).bytes for m in members))} MB, one "
                                    f"fused pass moves ~{_mb(_spec_bytes(spec))} MB"),
                            refs=["fusion-rules", "vectorized-access"] + cpu_ref)
            task.refs += ["algebraic-rewrites"] if _rewritten(task.ops, graph) else []
            task.params = default_params(spec, "cuda" if device == "cuda" else "c")
            plan.tasks.append(task)
            claimed.update(members)
        # what stays in the library, grouped by reason
        by_reason: dict[str, list[str]] = {}
        for n in calls:
            if n.name in claimed:
                continue
            r = why.get(n.name) or _why_not(n)
            by_reason.setdefault(r, []).append(n.name)
        for r, names in by_reason.items():
            tid += 1
            plan.tasks.append(Task(id=f"t{tid}", kind="keep", ops=names,
                                   targets=sorted({graph.node(x).target for x in names}),
                                   share=share(names), technique="library call", reason=r))
        if device == "cuda":
            tid = _tensor_core_tasks(plan, graph, settings, tid, share)
        # notes a person should know
        for n in graph.placeholders():
            if n.kind == "input" and n.stride is not None and n.shape is not None and \
                    n.stride != contiguous_strides(n.shape):
                plan.notes.append(f"input {n.name} is not contiguous: the program calls "
                                  ".contiguous() on it before its kernels")
        _note_mode(plan, graph)
        self._maybe_cuda_graph(plan, graph, device)
        return plan

    def _maybe_cuda_graph(self, plan: Plan, graph: Graph, device: str) -> None:
        if device != "cuda":
            return
        launches = graph.eager_launches or max(1, sum(
            1 for n in graph.calls() if n.op_class != "data_movement"))
        if graph.eager_ms is None:
            return
        per = graph.eager_ms * 1000.0 / launches
        if per >= LAUNCH_BOUND_US:
            plan.notes.append(f"no CUDA graph: {per:.1f} us of eager time per launch "
                              f"(>= {LAUNCH_BOUND_US:.0f} us) is not launch-bound")
            return
        ours = launches_left(plan, graph)
        saved = (ours - 1) * HOST_LAUNCH_US
        copied = [n for n in graph.placeholders() if n.kind == "input"] + [
            graph.node(r) for r in graph.output_names()]
        moved = sum(aten.nbytes(n.shape, n.dtype) for n in copied if n.shape is not None)
        cost = 2 * moved / COPY_BYTES_PER_US + len(copied) * HOST_LAUNCH_US
        if saved <= cost:
            plan.notes.append(
                f"no CUDA graph: the plan leaves about {ours} launch{'es' if ours != 1 else ''}"
                f" (~{saved:.0f} us a replay would save) and the replay's copies of "
                f"{moved / 1e6:.1f} MB of inputs and outputs cost ~{cost:.0f} us")
            return
        plan.tasks.append(Task(
            id=f"t{len(plan.tasks) + 1}", kind="cuda_graph", ops=[], share=1.0,
            technique="capture the whole forward in a torch.cuda.CUDAGraph per input shape; "
                      "copy inputs into static buffers, replay, return a clone",
            reason=f"launch-bound: {launches} launches in {graph.eager_ms:.3f} ms "
                   f"({per:.1f} us each); a replay costs one launch",
            refs=["cuda-graphs"]))


def _tensor_core_tasks(plan: Plan, graph: Graph, settings: Settings, tid: int,
                       share: Callable[[list[str]], float]) -> int:
    """The ``tensor_core_gemm`` tasks of a CUDA plan: GEMMs the split pays for, and (switched
    off, for the refine round to time) those of a shorter K; the last task id used."""
    split = tensor_core_gemms(graph)
    trial = [x for x in tensor_core_gemms(graph, SPLIT_TRY_K) if x not in split]
    if (split or trial) and not settings.tensor_cores:
        plan.notes.append(f"{len(split + trial)} fp32 GEMM(s) could run on tensor cores "
                          "(3xTF32 split) but tensor_cores is off: they stay in fp32 cuBLAS")
        return tid
    for ops, off in ((split, False), (trial, True)):
        if not ops:
            continue
        tid += 1
        flops = sum(graph.node(x).flops for x in ops)
        plan.tasks.append(Task(
            id=f"t{tid}", kind="tensor_core_gemm", ops=ops,
            targets=sorted({graph.node(x).target for x in ops}), share=share(ops),
            technique="3xTF32 split on tensor cores: each fp32 operand = TF32 big part + fp32 "
                      "remainder; three TF32 products with fp32 partial sums, the big products "
                      "in K-chunks and the cross terms apart (runtime.gemm; about an fp32 "
                      "GEMM's error at K = 8192, twice it at K = 1024)"
                      + ("; first in fp32 cuBLAS, the split timed in the refine round"
                         if off else ""),
            reason=f"{len(ops)} fp32 GEMM(s), {flops / 1e9:.0f} GFLOP: without TF32 they "
                   "run on the SIMT units; the split keeps fp32 accuracy on TF32 tensor "
                   "cores (compute capability 8.0+)"
                   + (f"; K under {SPLIT_MIN_K}, where it pays only for some shapes"
                      if off else ""),
            refs=["tf32x3-split"], params={"off": True} if off else {}))
    return tid


def launches_left(plan: Plan, graph: Graph) -> int:
    """About how many launches a forward of ``plan`` makes: eager's, less one per op a
    fusion task takes over, plus one kernel per such task and one per library call it keeps
    (a GEMM or convolution at the head of its epilogue)."""
    eager = graph.eager_launches or max(1, sum(
        1 for n in graph.calls() if n.op_class != "data_movement"))
    fused = [t for t in plan.tasks if t.kind not in ("keep", "cuda_graph")
             and not t.params.get("off")]   # a split the refine round only times
    known = {n.name: n for n in graph.nodes}
    ours = eager
    for t in fused:
        nodes = [known[o] for o in t.ops if o in known]
        ours -= sum(1 for n in nodes if n.op_class != "data_movement")
        ours += 1 + sum(1 for n in nodes if kept_in_library(n, graph))
    return max(1, ours)


def tensor_core_gemms(graph: Graph, min_k: int = SPLIT_MIN_K) -> list[str]:
    """fp32 GEMM nodes the 3xTF32 split should pay for: a K of ``min_k`` or more and
    SPLIT_MIN_FLOPS of work."""
    out = []
    for n in graph.calls():
        if n.target not in SPLIT_TARGETS or n.dtype != "float32":
            continue
        ins = [graph.node(x) for x in n.inputs()]
        if any(i.dtype not in (None, "float32") for i in ins):
            continue
        # the operand whose last dim is K: linear's weight, mm's / matmul's first, addmm's second
        pos = 1 if n.opname in ("linear", "addmm", "baddbmm") else 0
        ref = node_ref(n.args[pos]) if len(n.args) > pos else None
        if ref is None:
            continue
        k = (graph.node(ref).shape or [0])[-1]
        if k >= min_k and n.flops >= SPLIT_MIN_FLOPS:
            out.append(n.name)
    return out


def _kinds(spec) -> list[str]:
    """The kinds of a kernel's reductions, scans and windows (``_describe``'s names)."""
    return sorted({s.kind if s.op == "reduce" else
                   "pool_dense" if s.op == "pool" and s.window.get("cin") else f"{s.op}_{s.kind}"
                   for s in spec.stmts if s.op in ("reduce", "scan", "pool")})


def _pool_reason(kinds: list[str], members: list[str], graph: Graph) -> str:
    if "pool_dense" in kinds:
        more = sum(node_role(graph.node(m), graph) != "view" for m in members) - 1
        return ("a convolution of few input channels runs in cuDNN in fp32 arithmetic far "
                "below the FMA rate (and in TF32, torch.compile's channels-last pick, 5x the "
                "tolerance away): one kernel keeps a tile of outputs in registers, in fp32, "
                "and writes each output once"
                + (f", the {more} op{'s' * (more > 1)} around it fused" if more else ""))
    if "pool_conv" in kinds:
        more = sum(node_role(graph.node(m), graph) != "view" for m in members) - 1
        return ("a depthwise convolution does a few multiply-adds per element and is "
                "memory-bound, where the library runs it far below the bandwidth: one kernel "
                "reads the input once and writes the output once"
                + (f", the {more} op{'s' * (more > 1)} around it fused" if more else ""))
    n = len(members)
    return (f"{n} op{'s' * (n != 1)} around a pooling window: one kernel computes each window's inputs "
            "as it reads them and writes only the pooled tensor")


def _describe(spec, graph, kinds: list[str]) -> str:
    names = {"welford": "one-pass Welford mean/var", "softmax": "online softmax (max+sum in one "
             "pass)", "sum": "sum", "max": "max", "min": "min", "argmax": "argmax",
             "argmin": "argmin", "prod": "product", "scan_sum": "running sum (scan)",
             "scan_prod": "running product (scan)", "pool_max": "max pooling",
             "pool_avg": "average pooling",
             "pool_conv": "depthwise convolution (each output weighs its window by its "
                          "channel's taps)",
             "pool_dense": "convolution of few input channels (a tile of outputs a thread, "
                           "fp32 in registers)"}
    pw = [graph.node(m).opname for m in spec.ops
          if node_role(graph.node(m)) == "pointwise"]
    if spec.kind == "pointwise":
        return f"one elementwise kernel: {' -> '.join(pw)}"
    if spec.kind == "pool" and kinds == ["pool_dense"]:
        s = f"convolution kernel ({spec.numel} outputs): {names[kinds[0]]}"
        return s + (f", fused {', '.join(pw)}" if pw else "")
    if spec.kind == "pool":
        s = f"pooling kernel ({spec.numel} outputs, one per output element): {names[kinds[0]]}"
        return s + (f", fused {', '.join(pw)}" if pw else "")
    red = " + ".join(names[k] for k in kinds)
    norm = [graph.node(m).opname for m in spec.ops if node_role(graph.node(m)) == "norm"]
    s = f"row kernel ({spec.rows} rows x {spec.rowlen}): {red}"
    if norm:
        s += f" for {', '.join(norm)}"
    if pw:
        s += f", fused {', '.join(pw)}"
    return s


def _spec_bytes(spec) -> int:
    return sum(aten.nbytes(o.shape, o.dtype) * (2 if o.role == "inout" else 1)
               for o in spec.operands)


def _mb(b: int) -> str:
    return f"{b / 1e6:.1f}"
