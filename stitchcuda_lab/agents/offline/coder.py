"""The offline Coder: kernels from templates for each approved Task, plus the ModelNew program.

Iteration 0 emits one candidate with the planner's launch parameters. Later iterations propose
at most four measured variants of the best candidate so far: block size, vector width, items
per thread, row strategy (block/warp per row), C chunk size, running one fused group in the
library instead (a fusion boundary that did not pay), the GEMMs of a ``tensor_core_gemm``
task back in fp32 cuBLAS (does the 3xTF32 split pay here?), or the kept convolutions in the
other layout (``program.render``): on the GPU a first candidate runs depthwise
convolutions, and 2-d transposed ones with a pointwise epilogue, channels-last in the library,
as torch.compile does (``default_channels_last``). A candidate that failed is
answered with safer variants (scalar loads, then the failing groups in the library). What
changed is in ``Candidate.params["variant"]``. A person's edit is refined by merging each
variant into the edited code (``hand_edit.py``); variants that would change edited lines are
dropped, and ``why_empty`` says so when none is left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import aten
from ...candidate import Candidate, KernelSource
from .backend_c import emit_c
from .backend_cuda import emit_cuda
from .expand import kept_in_library
from .hand_edit import hand_edited, refine_hand_edit
from .helpers import contiguous_strides
from .ir import Unsupported
from .launch import default_params, launch_config
from .lower import build_spec, split_views
from .pool import DENSE_MAX_CHANNELS, dense_form
from .planner import SPLIT_TARGETS
from .rewrite import draws_random, rewrite
from .program import CannotRender, KernelCall, channels_last_convs, render, render_fallback

if TYPE_CHECKING:
    from ...graph import Graph
    from ...plan import Plan
    from ...verdict import Verdict
    from ...problem import Problem
    from ...settings import Settings

KERNEL_TASKS = ("pointwise_fusion", "reduction_fusion", "gemm_epilogue")
MAX_VARIANTS = 4
# Eager kernels per forward from which the problem's own forward replayed through a CUDA graph
# is a variant worth a verdict (``AS_IS``): a deep model, where a graph saves most of the time
# (ResNet101 on the H200: eager 13.6 ms, torch.compile's reduce-overhead 3.3 ms).
AS_IS_LAUNCHES = 64
AS_IS = "as_is"   # the program entry of that variant: every op as PyTorch runs it
AS_IS_LABEL = "every op in PyTorch, replayed through a CUDA graph"
RELAID = "relaid"   # the program entry: its kernels' knobs were chosen for channels-last
# the key of the program-wide choices among a candidate's per-task parameters (the layout
# of its convolutions), so that a variant carries them like any task's
PROGRAM = "program"


class OfflineCoder:
    """Template Coder (see module docstring)."""

    name = "offline"

    def code(self, problem: Problem, graph: Graph, plan: Plan, settings: Settings, *,
             iteration: int, previous: Candidate | None = None,
             feedback: Verdict | None = None, attempts: list | None = None) -> list[Candidate]:
        """``attempts``: the session's tries so far (``loop.Attempt``), so that a refine round
        does not spend a slot on the deep model's graph variant once it has a verdict."""
        self.why_empty = ""      # why a refine round has no candidate (the session says it)
        if iteration == 0 or previous is None:
            # knobs set in the plan (a person's edit) are what this candidate tries, so its
            # label says so rather than "planner defaults"
            set_ = [f"{t.id} " + ", ".join(f"{k}={v}" for k, v in sorted(t.params.items()))
                    for t in plan.tasks if t.params and t.status not in ("skipped", "failed")]
            first = self.candidate(problem, graph, plan, {}, iteration=iteration,
                                   **({"variant": "the plan's params: " + "; ".join(set_)}
                                      if set_ else {}))
            # a deep model's own forward through a CUDA graph is verified beside it from the
            # start: where a hundred TF32 convolutions or training-mode batch norms make the
            # result hang on every rounding, nothing else passes, and a bench that cuts the
            # refine round short (ResNet101: cut while verifying its first variant) never
            # reached it. It builds nothing, so it costs one verification.
            if not _as_is_worth_a_verdict(graph, plan):
                return [first]
            as_is = self.candidate(problem, graph, plan, {PROGRAM: {AS_IS: True}},
                                   iteration=iteration, variant=AS_IS_LABEL)
            return [first] + ([as_is] if as_is.digest() != first.digest() else [])
        if hand_edited(previous):   # keep the person's code; vary only what merges around it
            found, note = refine_hand_edit(self, problem, graph, plan, previous, iteration,
                                           feedback)
            self.why_empty = "" if found else note
            return found
        base = dict(previous.params.get("tasks", {}))
        # by its parameters, as the candidate records them: no program rendered to tell
        as_is_judged = any(a.candidate is not None and a.verdict is not None
                           and a.candidate.params.get("tasks", {}).get(PROGRAM, {}).get(AS_IS)
                           for a in attempts or [])
        variants = self.variants(graph, plan, base, iteration, feedback,
                                 as_is_judged=as_is_judged)
        out: list[Candidate] = []
        for label, tparams in variants[:MAX_VARIANTS]:
            c = self.candidate(problem, graph, plan, tparams, iteration=iteration,
                               parent=previous.id, variant=label)
            if c.digest() != previous.digest() and all(c.digest() != o.digest() for o in out):
                out.append(c)
        return out

    # -- one candidate -------------------------------------------------------------------------
    def candidate(self, problem: Problem, graph: Graph, plan: Plan,
                  overrides: dict[str, dict], *, iteration: int = 0, parent: str | None = None,
                  variant: str = "planner defaults") -> Candidate:
        lang = "cuda" if plan.device == "cuda" else "c"
        graph = rewrite(graph)   # the planner planned on the same rewrite (bias split, pooling)
        tasks = [t for t in plan.tasks if t.status not in ("skipped", "failed")]
        cuda_graph = lang == "cuda" and any(t.kind == "cuda_graph" for t in tasks)
        notes: list[str] = []
        if overrides.get(PROGRAM, {}).get(AS_IS):
            # the reference's own arithmetic, op for op: where a deep network's result hangs
            # on every rounding (training-mode batch norm over two values, a hundred TF32
            # convolutions), nothing else agrees with it to 1e-4; the graph is the gain
            notes.append("every op runs as PyTorch runs it (the reference's own arithmetic); "
                         "the forward is replayed through a CUDA graph")
            return _unchanged(problem, graph, notes, lang == "cuda", {PROGRAM: {AS_IS: True}},
                              iteration=iteration, parent=parent, variant=variant,
                              title="the problem's own forward")
        if graph.capture == "none":
            notes.append("graph capture failed: the problem's own forward runs unchanged")
            if cuda_graph:
                notes.append("the forward is replayed through a CUDA graph")
            return _unchanged(problem, graph, notes, cuda_graph, {}, iteration=iteration,
                              parent=parent, variant=variant)
        calls: list[KernelCall] = []
        kernels: list[KernelSource] = []
        used: dict[str, dict] = {}
        program = {**overrides.get(PROGRAM, {}),
                   "channels_last": built_channels_last(overrides, graph, lang)}
        library = _library_convs(graph, tasks, overrides)
        convs = channels_last_convs(graph, library) if program["channels_last"] else {}
        # what will be channels-last when the kernels run: the convolutions' outputs, then
        # the full-size outputs of kernels that read them so (``layout.py``)
        nhwc: set[str] = set(convs)
        # a program's first channels-last build takes that layout's launch defaults where
        # the NCHW plan's stood (``_relaid_params``); its variants vary what it then used
        relay = bool(convs) and not program.get(RELAID)
        for t in tasks:
            if t.kind not in KERNEL_TASKS:
                continue
            p = {**t.params, **overrides.get(t.id, {})}
            if p.get("off"):
                notes.append(f"{t.id}: run in the library in this variant (fusion boundary test)")
                used[t.id] = p
                continue
            members = [o for o in t.ops if not kept_in_library(graph.node(o), graph)]
            parts = [members]
            if p.get("conv") == "library":   # a dense convolution's kernel against cuDNN's
                parts = _around(graph, members, library)
                notes.append(f"{t.id}: its convolution runs in the library in this variant"
                             + (", what comes before it in a kernel of its own"
                                if len(parts) > 1 else ""))
                used[t.id] = p   # remembered even where no kernel is left
            for part in parts:
                kname = f"k{len(calls)}_{t.id}"
                try:
                    spec = build_spec(graph, part, kname, nhwc=nhwc, split_rows=lang == "cuda",
                                      views=split_views(graph, nhwc) if nhwc else None)
                except (Unsupported, KeyError) as e:
                    notes.append(f"{t.id}: kept in the library ({e})")
                    continue
                kp = p
                if lang == "cuda":
                    kp = _relaid_params(graph, part, spec, p, notes) if relay else \
                        {**default_params(spec), **p}
                    code = emit_cuda(spec, kp)
                    launch = launch_config(spec, kp)
                else:
                    code = emit_c(spec, p)
                    launch = {}
                used[t.id] = kp
                nhwc.update(o.node for o in spec.operands if o.role != "in" and o.layout)
                calls.append(KernelCall(spec=spec, task_id=t.id, launch=launch))
                kernels.append(KernelSource(name=kname, lang=lang, code=code, entry=[kname]))
        split: list[str] = []
        for t in tasks:
            if t.kind != "tensor_core_gemm" or lang != "cuda":
                continue
            p = {**t.params, **overrides.get(t.id, {})}
            used[t.id] = p
            if p.get("off"):
                notes.append(f"{t.id}: GEMMs in fp32 cuBLAS in this variant (split test)")
                continue
            names = {n.name for n in graph.nodes}
            mine = [o for o in t.ops if o in names and graph.node(o).target in SPLIT_TARGETS]
            if mine:
                split += mine
                notes.append(f"{t.id}: {', '.join(mine)} on tensor cores through runtime.gemm "
                             "(3xTF32 split, fp32 partial sums)")
        noncontig = sorted({o.node for c in calls for o in c.spec.operands if o.role == "in" and (
            graph.node(o.node).kind == "input" or _noncontig(graph.node(o.node)))})
        if noncontig:
            notes.append("calls .contiguous() (free when already contiguous) on kernel inputs: "
                         + ", ".join(noncontig))
        if cuda_graph:
            notes.append("the forward is captured in a CUDA graph per input signature and "
                         "replayed; each call returns a fresh clone of the static output")
        channels_last = bool(convs)
        if relay and lang == "cuda":
            program[RELAID] = True
        if channels_last or overrides.get(PROGRAM):
            used[PROGRAM] = program
        if channels_last:
            laid = sorted(c.spec.name for c in calls if any(o.layout for o in c.spec.operands))
            notes.append("convolutions run channels-last (NHWC input and weights); "
                         + (f"{', '.join(laid)} read and write channels-last where they lie; "
                            if laid else "")
                         + "what may be channels-last is made contiguous before views and the "
                         "other kernels read it")
        try:
            prog = render(graph, problem.source, problem.name, calls, lang, cuda_graph, notes,
                          split=set(split), channels_last=channels_last, library_convs=library)
        except CannotRender as e:
            notes.append(f"cannot write the graph as a program ({e}): the problem's own forward "
                         "runs unchanged")
            return _unchanged(problem, graph, notes, cuda_graph, {}, iteration=iteration,
                              parent=parent, variant=variant)
        replaced, kept = claims(graph, [c.spec.ops for c in calls] + [split])
        return Candidate(program=prog, kernels=kernels, iteration=iteration, parent=parent,
                         origin="offline", notes="\n".join(notes), replaced=replaced, kept=kept,
                         params={"tasks": used, "variant": variant, "cuda_graph": cuda_graph})

    # -- refinement ----------------------------------------------------------------------------
    def variants(self, graph: Graph, plan: Plan, base: dict[str, dict], iteration: int,
                 feedback: Verdict | None, *, as_is_judged: bool = False
                 ) -> list[tuple[str, dict]]:
        """Single-knob changes of ``base``, biggest tasks first; rotated by iteration.
        ``as_is_judged``: the problem's own forward in a CUDA graph has a verdict already."""
        lang = "cuda" if plan.device == "cuda" else "c"
        if base.get(PROGRAM, {}).get(AS_IS):
            if feedback is None or feedback.status == "pass":
                self.why_empty = ("the best program is the problem's own forward replayed "
                                  "through a CUDA graph: it has no kernel of its own to vary")
                return []
            base = {}   # it failed (a graph the forward does not allow): the planner's program
        as_is = _as_is_worth_a_verdict(graph, plan) and not as_is_judged
        as_is_variant = {PROGRAM: {AS_IS: True}}
        ktasks = sorted((t for t in plan.tasks if t.kind in KERNEL_TASKS
                         and t.status not in ("skipped", "failed")),
                        key=lambda t: -t.share)
        tc = [t for t in plan.tasks if t.kind == "tensor_core_gemm" and lang == "cuda"
              and t.status not in ("skipped", "failed")]
        if not ktasks and not tc:
            return ([(AS_IS_LABEL, as_is_variant)] if as_is else []) + \
                _layout_only(graph, plan, base, lang)
        failed = feedback is not None and feedback.status != "pass"
        out: list[tuple[str, dict]] = []

        def with_(tid: str, **kv) -> dict:
            d = {k: dict(v) for k, v in base.items()}
            d.setdefault(tid, {}).update(kv)
            return d

        # the other layout for the convolutions is measured once: a best that is that variant
        # carries both_layouts, and its variants keep its layout
        g = rewrite(graph)
        library = _library_convs(g, plan.tasks, base)
        flip = bool(channels_last_convs(g, library)) and \
            not base.get(PROGRAM, {}).get("both_layouts")
        cl = built_channels_last(base, g, lang)
        if failed:
            # a failed channels-last program (first by default for transposed and depthwise
            # convolutions) gets PyTorch's layout first: the safe one
            if flip and cl:
                out.append(("convolutions NCHW (PyTorch's layout) after a failed verdict",
                            with_(PROGRAM, channels_last=False, both_layouts=True,
                                  **{RELAID: False})))
            if as_is:
                out.append((f"{AS_IS_LABEL}, after a failed verdict", as_is_variant))
            scalar = {k: dict(v) for k, v in base.items()}
            for t in ktasks:
                scalar.setdefault(t.id, {}).update(vec=1)
            out.append(("all kernels scalar (vec=1) after a failed verdict", scalar))
            for t in tc + ktasks:
                out.append((f"{t.id} in the library after a failed verdict", with_(t.id, off=True)))
            return out
        pool: list[tuple[str, dict]] = []
        if as_is:   # a deep model: is the graph alone worth more than the fusions?
            pool.append((AS_IS_LABEL, as_is_variant))
        first = len(pool)   # what the knobs known to pay most go before (not the graph above)
        # torch.compile's NHWC where the best is NCHW, PyTorch's NCHW where the best took NHWC
        if flip:
            pool.append(("convolutions NCHW (PyTorch's layout)" if cl else
                         "convolutions channels-last (the NHWC layout torch.compile picks)",
                         with_(PROGRAM, channels_last=not cl, both_layouts=True,
                               **{RELAID: False})))
        # the knobs known to pay most for one kernel (a row kept in registers, a scan's chunk
        # depth) go first: a refine round cut short on the GPU (16 of 20 KernelBench level-2
        # problems) reaches only its first variants; after the other layout where it moves
        # the program more than one kernel's knob does (``_tf32_either_way``)
        head = len(pool) if flip and all(_tf32_either_way(g, c)
                                         for c in channels_last_convs(g, library)) else first
        dense_at = head
        for t in tc:   # does the split pay here? (measured, not assumed)
            off = bool({**t.params, **base.get(t.id, {})}.get("off"))
            again = "" if t.params.get("off") else " again"   # a split never timed yet
            pool.append((f"{t.id} GEMMs {f'on tensor cores{again}' if off else 'in fp32 cuBLAS'}",
                         with_(t.id, off=not off)))
        for t in ktasks:
            cur = {**t.params, **base.get(t.id, {})}
            if cur.get("off"):
                pool.append((f"{t.id} fused again", with_(t.id, off=False)))
                continue
            if lang == "cuda" and ("cot" in cur or cur.get("conv") == "library"):
                dense_at = _dense_variants(pool, dense_at, t, cur, base, with_, g)
                if cur.get("conv") != "library":
                    continue   # else its epilogue's kernel gets a kernel's knobs below
            if lang == "cuda":
                # a block-per-row scan (scan.py) has its own strategy and no float4 path:
                # of its params only the block and the elements a thread (``ipt``) count
                scan = "ipt" in cur and "rows" in cur
                for blk in (128, 512, 256, 1024):
                    if blk != cur.get("block"):
                        pool.append((f"{t.id}.block={blk}", with_(t.id, block=blk)))
                if "rows" in cur and not scan:
                    pool += [(f"{t.id}.rows={rows}", with_(t.id, rows=rows))
                             for rows in _other_rows(g, t.ops, str(cur.get("rows")))]
                if "vec" in cur and not scan:   # scans have no float4 path (nor "vec")
                    pool.append((f"{t.id}.vec={1 if cur.get('vec', 1) == 4 else 4}",
                                 with_(t.id, vec=1 if cur.get("vec", 1) == 4 else 4)))
                if "cache" in cur and cur.get("rows") in ("block", "thread", None):
                    pool.insert(head, (f"{t.id}.cache={not cur['cache']}",
                                    with_(t.id, cache=not cur["cache"])))
                if cur.get("cluster"):   # a block a row again, its row re-read (from L2 or
                    # DRAM), at the block such rows take without a cluster
                    pool.insert(head, (f"{t.id}.cluster=0", with_(t.id, cluster=0, block=512)))
                if scan:   # the chunk's depth first: the chain of chunks is what it waits on
                    pool.insert(head, (f"{t.id}.ipt={8 if cur['ipt'] == 4 else 4}",
                                    with_(t.id, ipt=8 if cur["ipt"] == 4 else 4)))
                elif "ipt" in cur:
                    for ipt in (1, 2, 4):
                        if ipt != cur.get("ipt"):
                            pool.append((f"{t.id}.ipt={ipt}", with_(t.id, ipt=ipt)))
                pool.append((f"{t.id}.waves={32 if cur.get('waves', 16) != 32 else 8}",
                             with_(t.id, waves=32 if cur.get("waves", 16) != 32 else 8)))
            elif "chunk" in cur:
                for ch in (4096, 65536):
                    if ch != cur.get("chunk"):
                        pool.append((f"{t.id}.chunk={ch}", with_(t.id, chunk=ch)))
            pool.append((f"{t.id} in the library (fusion boundary)", with_(t.id, off=True)))
        k = (iteration - 1) * MAX_VARIANTS % max(1, len(pool))   # rotated by iteration
        return pool[k:k + MAX_VARIANTS]


def _around(graph: Graph, members: list[str], convs: set[str]) -> list[list[str]]:
    """A task's members without its convolutions ``convs``, as the kernels that remain: what
    feeds a convolution (its prologue, shaped as its input) and what follows it."""
    rest = [o for o in members if o not in convs]
    before: set[str] = set()
    stack = [i for c in convs if c in members for i in graph.node(c).inputs()]
    while stack:
        m = stack.pop()
        if m in rest and m not in before:
            before.add(m)
            stack.extend(graph.node(m).inputs())
    parts = [[o for o in rest if o in before], [o for o in rest if o not in before]]
    return [x for x in parts if x]


def _relaid_params(graph: Graph, part: list[str], spec, p: dict, notes: list[str]) -> dict:
    """A kernel's launch knobs in a program's first channels-last build, its spec's defaults
    under ``p``. A kernel laid out channels-last (``layout.to_channels_last``: its dims
    permuted, the channel innermost) has other rows than the plan's NCHW kernel: a reduction
    over the channels walks them strided in NCHW (a thread a row) and contiguously here (a
    warp a row). Knobs still at the NCHW kernel's defaults are that layout's, not a choice:
    they take this spec's defaults; a knob set otherwise (a person's edit) is kept. The
    program then says so (``RELAID``): its refine variants' knobs are kept as they are set,
    the NCHW default among them."""
    mine = default_params(spec)
    if not any(o.layout for o in spec.operands):
        return {**mine, **p}
    planned = default_params(build_spec(graph, part, spec.name))
    relaid = {k: v for k, v in mine.items() if k in p and p[k] == planned.get(k) != v}
    if relaid:
        notes.append(f"{spec.name}: " + ", ".join(f"{k}={v}" for k, v in relaid.items())
                     + " for the channels-last layout (the plan's NCHW kernel had "
                     + ", ".join(f"{k}={p[k]}" for k in relaid) + ")")
    return {**mine, **p, **relaid}


def _other_rows(graph: Graph, ops: list[str], rows: str) -> list[str]:
    """The row strategies a refine round tries instead of ``rows``: interleaved rows a thread
    each or split among a block's warps (a short contiguous row's thread has nothing to
    split), contiguous ones a block or a warp each."""
    if rows == "split":
        return ["thread"]
    if rows != "thread":
        return [r for r in ("block", "warp") if r != rows]
    try:
        spec = build_spec(graph, [o for o in ops if not kept_in_library(graph.node(o), graph)])
    except (Unsupported, KeyError):
        return []
    return ["split"] if spec.kind == "rowwise" and not spec.reduce[-1] else []


def _library_convs(graph: Graph, tasks: list, params: dict[str, dict]) -> set[str]:
    """The dense convolutions that tasks' ``params`` leave to the library (``conv="library"``)."""
    return {o for t in tasks if t.kind in KERNEL_TASKS
            and {**t.params, **params.get(t.id, {})}.get("conv") == "library"
            for o in t.ops if dense_form(graph.node(o), graph)}


def _dense_variants(pool: list, at: int, t, cur: dict, base: dict[str, dict], with_,
                    graph: Graph) -> int:
    """A dense convolution's task (``pool.dense_tile``), its variants added to ``pool``: at
    ``at`` (after a bigger dense task's) whether its kernel beats cuDNN's, in either of
    cuDNN's layouts (the other one only where the task holds every convolution of the
    program, since the layout is the program's); at the end its tile's shapes. Returns
    where the next dense task's go."""
    tid, lib = t.id, cur.get("conv") == "library"
    alone = {n.name for n in graph.calls()
             if aten.library_family(n.target) == "convolution"} <= set(t.ops)
    first = [(f"{tid} convolution {'fused again' if lib else 'in cuDNN'}",
              with_(tid, conv=None if lib else "library"))]
    if not lib and alone and not base.get(PROGRAM, {}).get("both_layouts"):
        # cuDNN's channels-last kernel runs on TF32 tensor cores: 5x the fp32 tolerance away
        # for a plain output, inside it where what follows averages the errors away (a
        # global mean over the outputs)
        nhwc = with_(tid, conv="library")
        nhwc[PROGRAM] = {**nhwc.get(PROGRAM, {}), "channels_last": True, "both_layouts": True,
                         RELAID: False}
        first.append((f"{tid} convolution in cuDNN channels-last (TF32, the layout "
                      "torch.compile picks)", nhwc))
    tc = bool(cur.get("tc"))
    if not lib and tc:   # back from the tensor-core kernel, right after cuDNN's
        first.insert(1, (f"{tid} convolution on the SIMT tile", with_(tid, tc=False)))
    pool[at:at] = first
    if not lib:   # else the rest is its epilogue's kernels' (the caller's knobs)
        # the SIMT tile's shape (the tensor-core kernel's is fixed: conv_tc.tc_tile)
        for knob, vals in () if tc else (("px", (1, 4)), ("cot", (8, 32)), ("block", (256,))):
            pool += [(f"{tid}.{knob}={v}", with_(tid, **{knob: v})) for v in vals
                     if v != cur.get(knob)]
        if not tc:
            # fp32 on tensor cores (conv_tc.py) last: on an H100 it lost to the SIMT tile by
            # 25-43% on KernelBench's 3x3 convolutions of 8 channels (67, 87, 92), and a
            # refine round cut short reaches only its first variants
            pool.append((f"{tid} convolution on tensor cores (3xTF32)", with_(tid, tc=True)))
        pool.append((f"{tid} in the library (fusion boundary)", with_(tid, off=True)))
    return at + len(first)


def _as_is_worth_a_verdict(graph: Graph, plan: Plan) -> bool:
    """Whether the problem's own forward replayed through a CUDA graph (``AS_IS``) is a
    candidate: on the GPU, for a deep model (``AS_IS_LAUNCHES`` eager kernels or more), and not
    where the forward draws random numbers (a graph's replays draw other numbers than eager's
    calls from the same seed)."""
    launches = graph.eager_launches or sum(1 for n in graph.calls()
                                           if n.op_class != "data_movement")
    return plan.device == "cuda" and launches >= AS_IS_LAUNCHES and not any(
        draws_random(n) for n in graph.calls())


def _unchanged(problem: Problem, graph: Graph, notes: list[str], cuda_graph: bool,
               tasks: dict, *, iteration: int, parent: str | None, variant: str,
               title: str = "no captured graph") -> Candidate:
    """A candidate that runs the problem's own forward (``program.render_fallback``), every
    op kept, optionally replayed through a CUDA graph."""
    prog = render_fallback(problem.source, problem.name, cuda_graph, notes, title=title)
    return Candidate(program=prog, kernels=[], iteration=iteration, parent=parent,
                     origin="offline", notes="\n".join(notes), replaced=[],
                     kept=sorted({n.target for n in graph.calls()}),
                     params={"tasks": tasks, "variant": variant, "cuda_graph": cuda_graph})


def built_channels_last(params: dict, graph: Graph, lang: str) -> bool:
    """Whether ``params`` (a candidate's per-task parameters) build a channels-last program:
    as their ``program`` entry says, else the default, which is a first candidate's only
    (parameters without the entry, an NCHW parent's variants or a session saved before the
    default, were built NCHW)."""
    return bool(params.get(PROGRAM, {}).get("channels_last",
                                             default_channels_last(graph, lang) and not params))


def default_channels_last(graph: Graph, lang: str) -> bool:
    """Whether a first candidate runs its convolutions channels-last: on the GPU, where every
    one is a depthwise convolution, or a 2-d transposed one whose epilogue is pointwise alone.
    There channels-last gives the reference's own bits faster: cuDNN runs a transposed
    convolution NHWC on TF32 tensor cores in any case and NCHW only adds its two layout copies
    (1.9 of 4.6 ms for KernelBench's ConvTranspose2d_Subtract_Tanh on the H200), and a
    depthwise one with a channel multiplier is exact and 3.6x faster channels-last (one with
    one output channel per group is computed by a kernel of ours, ``pool.py``). A pool, a
    reduction or a norm after a transposed convolution reads NCHW (``layout.to_channels_last``
    leaves those), so its program pays a copy the layout does not win back: on the H200
    KernelBench's ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh ran 0.91x eager channels-last
    and 1.48x NCHW, ConvTranspose2d_Min_Sum_GELU_Add 0.85x and 1.42x. A plain NCHW
    convolution may run in fp32 arithmetic (few input channels), where channels-last would
    pick TF32 kernels 5x the fp32 tolerance away: those, and 3-d convolutions, start NCHW;
    the refine round measures the other layout in every case."""
    if lang != "cuda":
        return False
    convs = channels_last_convs(graph)
    if not convs or not all(fmt == "channels_last" for fmt in convs.values()):
        return False
    if all(_depthwise(graph, c) for c in convs):
        return True
    epilogue_pointwise = all(
        n.name in convs or aten.category(n.target) in ("pointwise", "data_movement")
        for n in graph.calls())
    return epilogue_pointwise and all(_depthwise(graph, c) or _transposed(graph, c)
                                      for c in convs)


def _transposed(graph: Graph, name: str) -> bool:
    n = graph.node(name)
    return n.opname.startswith("conv_transpose") or (
        n.opname in ("convolution", "_convolution") and len(n.args) > 6 and n.args[6] is True)


def _layout_only(graph: Graph, plan: Plan, base: dict[str, dict],
                 lang: str) -> list[tuple[str, dict]]:
    """A program with no kernel of ours to vary (a lone convolution, KernelBench level 1's):
    on the GPU, its convolutions in the other layout, once, where cuDNN runs them on TF32
    tensor cores either way (``_tf32_either_way``): a transposed 3-d one ran in 0.95 ms
    channels-last against 1.88 NCHW on the H200, the same bits. The input's copy to
    channels-last is the price; the verdict weighs it."""
    g = rewrite(graph)
    convs = channels_last_convs(g, _library_convs(g, plan.tasks, base))
    if lang != "cuda" or not convs or base.get(PROGRAM, {}).get("both_layouts") \
            or not all(_tf32_either_way(g, c) for c in convs):
        return []
    cl = built_channels_last(base, g, lang)
    return [("convolutions NCHW (PyTorch's layout)" if cl else
             "convolutions channels-last (cuDNN's own, the layout torch.compile picks)",
             {**{k: dict(v) for k, v in base.items()},
              PROGRAM: {**base.get(PROGRAM, {}), "channels_last": not cl,
                        "both_layouts": True, RELAID: False}})]


def _tf32_either_way(graph: Graph, name: str) -> bool:
    """A transposed convolution, or a plain 2-d one of more than ``DENSE_MAX_CHANNELS`` input
    channels a group: cuDNN runs it on TF32 tensor cores NCHW as channels-last (the same
    bits for a transposed one; the reference's error on KernelBench's plain ones was 2-5x
    the tolerance), channels-last faster. One of few input channels may run in exact fp32
    NCHW, where channels-last picks TF32 kernels and fails the check; plain (not transposed)
    3-d ones ran slower channels-last. Both assume cuDNN's TF32 switch at PyTorch's default
    (on), as the reference runs."""
    if _transposed(graph, name):
        return True
    n = graph.node(name)
    w = graph.node(n.args[1]["node"]).shape
    return w is not None and len(w) == 4 and w[1] > DENSE_MAX_CHANNELS


def _depthwise(graph: Graph, name: str) -> bool:
    """One input channel per group, as many groups as input channels."""
    n = graph.node(name)
    if _transposed(graph, name):
        return False
    x, w = graph.node(n.args[0]["node"]).shape, graph.node(n.args[1]["node"]).shape
    return x is not None and w is not None and len(x) > 1 and len(w) > 1 \
        and w[1] == 1 and x[1] > 1


def claims(graph: Graph, groups: list[list[str]]) -> tuple[list[str], list[str]]:
    """(replaced, kept) aten op names: what the kernels compute and what the program still
    calls. A name both computed and called (directly or by what a kept op lowers to) is only
    ``kept``, so the Verifier's trace of library calls never contradicts ``replaced``. Cheap
    ops (views, copies, allocation: ``aten.op_class``) are never claimed: the program runs
    some itself and the Verifier never counts them."""
    fused = {m for g in groups for m in g}
    kept: set[str] = set()
    for n in graph.calls():
        if n.name in fused or n.target == "getitem":
            continue
        kept.add(n.target)
        kept.update(n.lowers_to)
    replaced: set[str] = set()
    for m in fused:
        n = graph.node(m)
        if not aten.computes(n.target):
            continue
        replaced.add(n.target)
        replaced.update(n.lowers_to)
    # by op packet: a kept op's nested ops are recorded as the profiler names them (aten::add)
    kept_ops = {aten.norm(k) for k in kept}
    replaced = {r for r in replaced if aten.norm(r) not in kept_ops and r.startswith("aten.")
                and aten.computes(r)}
    return sorted(replaced), sorted(kept)


def _noncontig(n) -> bool:
    return n.stride is not None and n.shape is not None and \
        n.stride != contiguous_strides(n.shape)
