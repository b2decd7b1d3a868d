"""Capture a problem's forward as an ATen graph, classify ops, count FLOPs/bytes, profile eager.

``analyse`` exports the model with ``torch.export`` (the training IR, which keeps high-level ops
such as ``aten.linear``, ``aten.layer_norm``, ``aten.softmax`` and ``aten.gelu`` so planners can
recognise patterns), then replays the graph op by op under a dispatch recorder (which also
proves the graph runs as plain ``torch.ops.aten`` calls and records what each op lowers to), and
finally profiles eager PyTorch with ``torch.profiler``.

Profile matching: the forward runs inside ``record_function("stitch::forward")``; its direct
children are the top-level aten calls in execution order. Graph call nodes are walked in order
and each takes the next unclaimed child whose name equals its op name (``aten.linear.default``
-> ``aten::linear``). On CUDA a node's time is the device time of that call (kernels launched by
it and its children), on CPU its inclusive CPU time, averaged over the profiled iterations.
Children nobody claimed are reported in ``warnings``.

>>> g = analyse(problem, device="cpu")                     # doctest: +SKIP
>>> [n.op_class for n in g.calls()]                        # doctest: +SKIP
['gemm', 'pointwise', 'gemm']
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import aten
from .quiet import quiet_profiler

if TYPE_CHECKING:
    from .problem import Problem
    from .settings import Settings

_NORM_FLOPS_PER_ELEM = 5   # mean, variance, subtract, scale, shift (softmax: max, exp, sum, div)


@dataclass
class Node:
    """One op (or input) of the captured forward. Args are JSON: node refs are {"node": name}."""

    name: str
    op: str                       # "placeholder" | "call_function" | "output"
    target: str                   # "aten.add.Tensor" ("" for placeholders)
    op_class: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    shape: list | None = None
    dtype: str | None = None
    stride: list | None = None
    kind: str | None = None       # placeholders: input | param | buffer | const
    fqn: str | None = None
    # a constant's value (nested lists) where the model holds it under no name: a tensor its
    # forward makes from literals (``torch.tensor(0.5)``), which export lifts to a constant
    value: Any = None
    input_index: int | None = None
    flops: int = 0
    bytes: int = 0
    time_us: float | None = None
    lowers_to: list[str] = field(default_factory=list)  # aten ops the call dispatches to
    mutates: list[int] = field(default_factory=list)     # arg positions written in place

    @property
    def opname(self) -> str:
        """``aten.add.Tensor`` -> ``add``."""
        return aten.short(self.target)

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape is not None else 0

    def inputs(self) -> list[str]:
        """Names of the nodes this node reads, in argument order (duplicates removed)."""
        seen: list[str] = []
        for r in _refs([self.args, self.kwargs]):
            if r not in seen:
                seen.append(r)
        return seen


@dataclass
class Graph:
    """A captured forward. ``total_bytes`` is the whole-forward minimum (graph inputs read once,
    outputs written once); ``Node.bytes`` is each op's own traffic when run alone."""

    nodes: list[Node] = field(default_factory=list)
    outputs: list = field(default_factory=list)
    capture: str = "none"
    device: str = "cpu"
    warnings: list[str] = field(default_factory=list)
    eager_ms: float | None = None
    total_flops: int = 0
    total_bytes: int = 0
    training: bool = False
    mode_dependent: list[str] = field(default_factory=list)  # what train()/eval() changes
    eager_launches: int | None = None  # device kernels per eager forward (CUDA profile only)
    output_spec: str = "single"        # how forward returns `outputs`: single | tuple | list

    # -- lookup helpers -------------------------------------------------------------------
    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def calls(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "call_function"]

    def placeholders(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "placeholder"]

    def users(self) -> dict[str, list[str]]:
        """node name -> names of nodes reading it ("output" for graph outputs)."""
        out: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for r in n.inputs():
                out.setdefault(r, []).append(n.name)
        for r in _refs(self.outputs):
            out.setdefault(r, []).append("output")
        return out

    def output_names(self) -> list[str]:
        return list(_refs(self.outputs))

    # -- serialisation --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Graph:
        d = dict(d)
        names = {f.name for f in dataclasses.fields(Node)}
        d["nodes"] = [n if isinstance(n, Node) else Node(**{k: v for k, v in n.items() if k in names})
                      for n in d.get("nodes", [])]
        gnames = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in gnames})

    def summary(self) -> str:
        """A table a person (or an LLM prompt) reads: one line per op."""
        lines = [f"Graph ({self.capture}, {self.device}, {'train' if self.training else 'eval'}): "
                 f"{len(self.calls())} ops, {_si(self.total_flops)}FLOP, min {_si(self.total_bytes)}B"
                 + (f", eager {self.eager_ms:.3f} ms" if self.eager_ms is not None else "")]
        for n in self.nodes:
            if n.op == "placeholder":
                what = (n.kind or "") + (f" {n.fqn}" if n.fqn else f" #{n.input_index}"
                                 if n.input_index is not None else "")
                lines.append(f"  {n.name:<20} {what:<24} {n.dtype} {n.shape}")
            elif n.op == "call_function":
                args = ", ".join(_fmt_arg(a) for a in n.args)
                t = f"{n.time_us:9.1f}us" if n.time_us is not None else " " * 11
                lines.append(f"  {n.name:<20} {n.target}({args}) -> {n.dtype} {n.shape} "
                             f"[{n.op_class}] {_si(n.flops)}FLOP {_si(n.bytes)}B {t}")
        lines.append(f"  return {', '.join(self.output_names())}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# ---------------------------------------------------------------------------------------------
def analyse(problem: Problem, device: str = "cpu", profile: bool = True,
            settings: Settings | None = None) -> Graph:
    """Capture ``problem``'s forward on ``device`` and measure eager PyTorch on it.

    Never raises for a model that export cannot capture: the graph then has ``capture="none"``,
    only the input placeholders, and warnings saying why.
    """
    import torch

    seed = settings.seed if settings is not None else 42
    model = problem.make_model(device=device, seed=seed)
    inputs = list(problem.make_inputs(device=device, seed=seed))
    graph = Graph(device=str(device), training=bool(model.training),
                  mode_dependent=mode_dependent_modules(model))
    ep = None
    errors = []
    for strict in (False, True):
        try:
            with torch.no_grad():
                ep = torch.export.export(model, tuple(inputs), strict=strict)
            break
        except Exception as e:  # export refuses many things; say which and carry on  # noqa: BLE001  (analysis must not fail)
            errors.append(f"torch.export (strict={strict}) failed: {type(e).__name__}: "
                          f"{_first_line(e)}")
    if ep is None:
        graph.warnings += errors
        graph.warnings.append("graph capture failed: only whole-forward options (keep, CUDA graph) "
                              "are possible")
        graph.nodes = [_input_node(i, x) for i, x in enumerate(inputs)]
    else:
        graph.capture = "torch.export"
        _from_export(graph, ep, model)
        _functional_in_place(graph)
        try:
            kind = ep.call_spec.out_spec.type
            graph.output_spec = {tuple: "tuple", list: "list"}.get(kind, "single")
        except Exception:  # noqa: BLE001  (analysis must not fail)
            graph.output_spec = "tuple" if len(graph.outputs) > 1 else "single"
        _replay(graph, ep, model, inputs)
    _count(graph)
    if profile:
        try:
            _profile(graph, model, inputs, settings)
        except Exception as e:  # noqa: BLE001  (analysis must not fail)
            graph.warnings.append(f"eager profile failed: {type(e).__name__}: {_first_line(e)}")
    return graph


def mode_dependent_modules(model: Any) -> list[str]:
    """The submodules whose forward depends on ``model.training``, as ``"name (Class)"``.

    Batch norm (batch or running statistics), dropout of every kind, instance norm that
    tracks running statistics, RReLU (random or fixed slope) and attention with dropout;
    layers built of these (a TransformerEncoderLayer) show as their parts.
    """
    import torch.nn as nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd
    from torch.nn.modules.instancenorm import _InstanceNorm

    out = []
    for name, m in model.named_modules():
        if isinstance(m, _InstanceNorm):
            dep = bool(m.track_running_stats)
        elif isinstance(m, nn.MultiheadAttention):
            dep = m.dropout > 0
        else:
            dep = isinstance(m, (_BatchNorm, _DropoutNd, nn.RReLU))
        if dep:
            out.append(f"{name or '(model)'} ({type(m).__name__})")
    return out


_MODE_OPS = ("dropout", "batch_norm", "rrelu")   # functional calls that may take self.training


def mode_dependent(graph: Graph) -> list[str]:
    """What follows the capture's mode: the modules of ``mode_dependent_modules``, else the
    captured dropout / batch norm / RReLU calls (a functional ``F.dropout(x, training=...)``)."""
    if graph.mode_dependent:
        return list(graph.mode_dependent)
    ops = [n.opname for n in graph.calls() if any(k in n.opname for k in _MODE_OPS)]
    return [f"{op} (a functional call)" for op in dict.fromkeys(ops)]


def _input_node(i: int, x: Any) -> Node:
    n = Node(name=f"arg{i}", op="placeholder", target="", op_class="input", kind="input",
             input_index=i)
    _set_meta(n, x)
    return n


def _from_export(graph: Graph, ep: Any, model: Any) -> None:
    import torch

    sig = ep.graph_signature
    kinds: dict[str, tuple[str, str | None]] = {}
    user_index = 0
    for spec in sig.input_specs:
        name = spec.arg.name
        k = spec.kind.name
        if k == "PARAMETER":
            kinds[name] = ("param", spec.target)
        elif k == "BUFFER":
            kinds[name] = ("buffer", spec.target)
        elif k in ("CONSTANT_TENSOR", "CUSTOM_OBJ", "TOKEN"):
            kinds[name] = ("const", spec.target)
        else:
            kinds[name] = ("input", None)
    mutated = {s.arg.name for s in sig.output_specs if s.kind.name != "USER_OUTPUT"}
    user_outputs = [s.arg.name for s in sig.output_specs if s.kind.name == "USER_OUTPUT"]
    for fx in ep.graph.nodes:
        if fx.op == "placeholder":
            kind, fqn = kinds.get(fx.name, ("input", None))
            n = Node(name=fx.name, op="placeholder", target="", op_class="input", kind=kind, fqn=fqn)
            if kind == "input":
                n.input_index = user_index
                user_index += 1
            elif kind == "const":
                n.value = _lifted_value(model, fqn, getattr(ep, "constants", {}))
            _set_meta(n, fx.meta.get("val"))
            graph.nodes.append(n)
        elif fx.op == "call_function":
            target = _target_name(fx.target)
            n = Node(name=fx.name, op="call_function", target=target, op_class="other",
                     args=_jsonable(list(fx.args)), kwargs=_jsonable(dict(fx.kwargs)))
            n.op_class = classify(n)
            _set_meta(n, fx.meta.get("val"))
            if isinstance(fx.target, torch._ops.OpOverload):
                schema = fx.target._schema
                n.mutates = [i for i, a in enumerate(schema.arguments)
                             if a.alias_info is not None and a.alias_info.is_write]
            graph.nodes.append(n)
        elif fx.op == "output":
            outs = fx.args[0]
            graph.outputs = [{"node": o.name} if hasattr(o, "name") else _jsonable(o)
                             for o in outs if not (hasattr(o, "name") and o.name in mutated
                                                   and o.name not in user_outputs)]
        else:
            graph.warnings.append(f"unexpected fx node {fx.op} {fx.name}")
    # Buffers the forward updates in place (batch-norm running stats and counters).
    fqns = {n.name: n.fqn for n in graph.nodes if n.kind == "buffer"}
    found: dict[str, str] = {}
    for s in sig.output_specs:
        if s.kind.name == "BUFFER_MUTATION":
            found.setdefault(str(s.target), s.arg.name)
    for n in graph.calls():
        refs = [_refs(n.args[i]) for i in n.mutates if i < len(n.args)]
        if n.opname in ("batch_norm", "instance_norm") and len(n.args) > 5 and n.args[5]:
            refs.append(_refs(n.args[3:5]))
        for r in (r for rs in refs for r in rs):
            if r in fqns:
                found.setdefault(str(fqns[r]), n.name)
    graph.warnings += mutation_warnings(found)


def mutation_warnings(found: dict[str, str], most: int = 3) -> list[str]:
    """One warning per mutated buffer (``fqn -> node``), or one for all of them when there are
    more than ``most``: a ResNet in training mode updates three buffers in each of its 100
    batch norms, and 300 lines would bury every other message.

    >>> mutation_warnings({"bn.running_mean": "batch_norm"})
    ['forward mutates buffer bn.running_mean (node batch_norm)']
    >>> mutation_warnings({f"b{i}.bn.{k}": "n" for i in range(5)
    ...                    for k in ("running_mean", "running_var")})[0][:68]
    'forward mutates 10 buffers in place (running_mean, running_var of 5 '
    """
    if len(found) <= most:
        return [f"forward mutates buffer {f} (node {n})" for f, n in found.items()]
    leaves = sorted({f.rpartition(".")[2] for f in found})
    owners = list(dict.fromkeys(f.rpartition(".")[0] or "(model)" for f in found))
    named = ", ".join(owners[:4]) + (f" and {len(owners) - 4} more" if len(owners) > 4 else "")
    return [f"forward mutates {len(found)} buffers in place ({', '.join(leaves)} of "
            f"{len(owners)} modules: {named}); they are updated as PyTorch does"]


def _replay(graph: Graph, ep: Any, model: Any, inputs: list) -> None:
    """Run the graph op by op as plain aten calls; record what each lowers to; compare outputs
    with eager so the coder can trust the graph as a program."""
    import copy

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = _target_name(func)
            if name not in self.ops:
                self.ops.append(name)
            return func(*args, **(kwargs or {}))

    try:
        ref_model = copy.deepcopy(model)
        state = dict(ref_model.named_parameters())
        state.update(dict(ref_model.named_buffers()))
        env: dict[str, Any] = {}
        consts = getattr(ep, "constants", {})
        fx_nodes = {fx.name: fx for fx in ep.graph.nodes}
        for n in graph.nodes:
            if n.op != "placeholder":
                continue
            if n.kind == "input":
                x = inputs[n.input_index or 0]     # an input placeholder has its index
                env[n.name] = x.clone() if hasattr(x, "clone") else x
            elif n.kind in ("param", "buffer"):
                env[n.name] = state[n.fqn]
            elif n.fqn in consts:
                env[n.name] = consts[n.fqn]
            else:
                env[n.name] = _attr(ref_model, n.fqn)
        with torch.no_grad():
            for n in graph.calls():
                fx = fx_nodes[n.name]
                args, kwargs = _bind(fx.args, env), _bind(fx.kwargs, env)
                rec = _Record()
                with rec:
                    env[n.name] = fx.target(*args, **kwargs)
                n.lowers_to = rec.ops
            got = [env[r] for r in _refs(graph.outputs)]
            want = _flat_tensors(copy.deepcopy(model)(*[x.clone() if hasattr(x, "clone") else x
                                                        for x in inputs]))
        if len(got) == len(want) and all(
                torch.allclose(g.float(), w.float(), atol=1e-4, rtol=1e-4, equal_nan=True)
                for g, w in zip(got, want) if torch.is_tensor(g) and torch.is_tensor(w)
                and g.shape == w.shape and not (g.is_floating_point() and g.dtype != w.dtype)):
            return
        graph.warnings.append("replaying the graph as aten calls did not reproduce eager outputs "
                              "(random ops or training-mode dropout?)")
    except Exception as e:  # noqa: BLE001  (analysis must not fail)
        graph.warnings.append(f"replaying the graph as aten calls failed: {type(e).__name__}: "
                              f"{_first_line(e)}")


def _count(graph: Graph) -> None:
    by_name = {n.name: n for n in graph.nodes}
    for n in graph.calls():
        n.flops = node_flops(n, by_name)
        n.bytes = node_bytes(n, by_name)
    graph.total_flops = sum(n.flops for n in graph.calls())
    used = set()
    for n in graph.calls():
        used.update(n.inputs())
    read = sum(_nbytes(n) for n in graph.placeholders() if n.name in used or graph.capture == "none")
    written = sum(_nbytes(by_name[r]) for r in set(_refs(graph.outputs)) if r in by_name)
    graph.total_bytes = read + written


def _nested_ops(ev: Any) -> list[str]:
    """The aten ops a profiler event ran inside it, at any depth (``aten::add``)."""
    out: list[str] = []
    stack = list(ev.cpu_children)
    while stack:
        c = stack.pop()
        if str(c.name).startswith("aten::"):
            out.append(str(c.name))
        stack.extend(c.cpu_children)
    return out


def _profile(graph: Graph, model: Any, inputs: list, settings: Settings | None) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = str(graph.device).startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    iters = 5
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        sync()
        walls = []
        for _ in range(max(iters, 5)):
            t0 = time.perf_counter()
            model(*inputs)
            sync()
            walls.append((time.perf_counter() - t0) * 1e3)
        graph.eager_ms = statistics.median(walls)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with quiet_profiler(), profile(activities=acts) as prof:   # its log lines on fd 2
            for _ in range(iters):
                with record_function("stitch::forward"):
                    model(*inputs)
            sync()
    forwards = [e for e in prof.events() if e.name == "stitch::forward"]
    if not forwards:
        graph.warnings.append("eager profile: no forward events recorded")
        return
    calls = graph.calls()
    times: dict[str, list[float]] = {n.name: [] for n in calls}
    unmatched: dict[str, int] = {}
    for fwd in forwards:
        children = sorted(fwd.cpu_children, key=lambda e: e.time_range.start)
        claimed = [False] * len(children)
        pos = 0
        for n in calls:
            want = "aten::" + n.opname
            for j in range(pos, len(children)):
                if not claimed[j] and children[j].name == want:
                    claimed[j] = True
                    pos = j + 1
                    ev = children[j]
                    times[n.name].append(ev.device_time_total if cuda else ev.cpu_time_total)
                    # what the op runs inside its own kernel (CPU logsumexp calls add): the
                    # replay's dispatch mode sees only the op, the Verifier's trace all of it
                    nested = [f for f in _nested_ops(ev) if f not in n.lowers_to]
                    n.lowers_to = list(dict.fromkeys(n.lowers_to + nested))
                    break
        for j, c in enumerate(children):
            if not claimed[j]:
                unmatched[c.name] = unmatched.get(c.name, 0) + 1
    for n in calls:
        if times[n.name]:
            n.time_us = sum(times[n.name]) / len(times[n.name])
        elif n.op_class not in ("data_movement",) and n.target != "getitem":
            n.time_us = 0.0
    if unmatched:
        graph.warnings.append("eager profile: calls not matched to graph nodes: " + ", ".join(
            f"{k} x{v // len(forwards)}" for k, v in sorted(unmatched.items()) if v >= len(forwards)))
    if cuda:
        kernels = [e for e in prof.events() if getattr(e, "device_type", None) is not None
                   and str(e.device_type).endswith("CUDA")]
        graph.eager_launches = max(1, round(len(kernels) / iters)) if kernels else None


# ---------------------------------------------------------------------------------------------
def classify(n: Node) -> str:
    """The op class of a call node, by its aten op name (``aten.category``)."""
    if n.op == "placeholder":
        return "input"
    return aten.category(n.target)


def node_flops(n: Node, by_name: dict[str, Node]) -> int:
    """Floating point operations of one op.

    GEMM 2*M*N*K (K = the first matrix operand's last dim, M*N = output elements), convolution
    2*out*Cin/groups*kh*kw (= 2*out*prod(weight.shape[1:])), transposed convolution
    2*in*Cout/groups*kh*kw, pointwise 1 per output element, reductions 1 per element read,
    normalisations 5 per element, RNNs 2*steps*batch*(weight elements).
    """
    cls = n.op_class
    ins = [by_name[r] for r in n.inputs() if r in by_name]
    tin = [x for x in ins if x.shape is not None]
    shapes: list[list[int]] = [x.shape for x in tin if x.shape is not None]   # tin's, in order
    name = n.opname
    if cls == "gemm":
        if "attention" in name and len(tin) >= 3:
            q, k = shapes[0], shapes[1]
            return 4 * math.prod(q[:-1]) * k[-2] * q[-1]
        mats = [s for s in shapes if len(s) >= 1]
        if name in ("addmm", "baddbmm", "addbmm", "addmv") and len(mats) >= 2:
            mats = mats[1:]
        if not mats or n.shape is None:
            return 0
        return 2 * n.numel * mats[0][-1]
    if cls == "convolution":
        if len(tin) < 2 or n.shape is None:
            return 0
        w = shapes[1]
        transposed = "transpose" in name or (name in ("convolution", "_convolution")
                                              and len(n.args) > 6 and n.args[6] is True)
        if transposed:
            return 2 * tin[0].numel * math.prod(w[1:])
        return 2 * n.numel * math.prod(w[1:])
    if cls == "pointwise":
        return n.numel
    if cls == "reduction":
        return tin[0].numel if tin else 0
    if cls == "normalization":
        return _NORM_FLOPS_PER_ELEM * (tin[0].numel if tin else n.numel)
    if cls == "rnn" and tin:
        x = tin[0]
        weights = [by_name[r] for r in _refs(n.args[2:3]) if r in by_name]
        steps = x.numel // x.shape[-1] if x.shape else 0
        return 2 * steps * sum(w.numel for w in weights if w.shape and len(w.shape) == 2)
    return 0


def node_bytes(n: Node, by_name: dict[str, Node]) -> int:
    """Bytes an op moves when it runs alone: each tensor input read once, output written once
    (views move nothing)."""
    if aten.is_view(n.target):
        return 0
    read = sum(_nbytes(by_name[r]) for r in n.inputs() if r in by_name)
    return read + _nbytes(n)


# ---------------------------------------------------------------------------------------------
def _nbytes(n: Node) -> int:
    if n.shape is None:
        return getattr(n, "_tuple_bytes", 0)
    return aten.nbytes(n.shape, n.dtype)


def _set_meta(n: Node, val: Any) -> None:
    import torch

    if isinstance(val, torch.Tensor):
        n.shape = [int(s) for s in val.shape]
        n.dtype = str(val.dtype).replace("torch.", "")
        try:
            n.stride = [int(s) for s in val.stride()]
        except Exception:  # noqa: BLE001  (analysis must not fail)
            n.stride = None
    elif isinstance(val, (tuple, list)):
        # Multi-output op (max.dim, native_layer_norm): its getitem users carry the shapes.
        object.__setattr__(n, "_tuple_bytes", sum(
            v.numel() * v.element_size() for v in val if isinstance(v, torch.Tensor)))
    elif isinstance(val, (int, float, bool)):
        n.dtype = type(val).__name__


def _target_name(t: Any) -> str:
    import operator

    if t is operator.getitem:
        return "getitem"
    s = str(t)
    if s.startswith("aten::"):
        s = "aten." + s[len("aten::"):]
    return s


def _jsonable(x: Any) -> Any:
    import torch

    if hasattr(x, "op") and hasattr(x, "name") and hasattr(x, "meta"):  # torch.fx.Node
        return {"node": x.name}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, torch.dtype):
        return {"dtype": str(x).replace("torch.", "")}
    if isinstance(x, torch.device):
        return {"device": str(x)}
    if isinstance(x, torch.memory_format):
        return {"memory_format": str(x).replace("torch.", "")}
    if isinstance(x, torch.layout):
        return {"layout": str(x).replace("torch.", "")}
    return {"repr": repr(x)}


def _functional_in_place(graph: Graph) -> None:
    """An in-place pointwise op on a fresh intermediate (``out += identity``, ``ReLU(inplace=
    True)`` after a convolution) reads as its functional op when nothing reads the old tensor
    afterwards: its users see the same values, and a kernel may write them anywhere. Fresh: made
    by an op whose result aliases none of its inputs (not an input, a parameter, a buffer, a
    view, ``to`` of the same dtype). Nothing reads it afterwards: no op after the in-place one,
    nor the output, reads it or any alias of it (a view taken before and read after)."""
    import torch
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    users = graph.users()
    outputs = set(_refs(graph.outputs))
    by_name = {n.name: n for n in graph.nodes}
    for n in graph.calls():
        if n.mutates != [0] or aten.category(n.target) != "pointwise" or not n.args:
            continue
        written = next(iter(_refs(n.args[:1])), None)
        src = by_name.get(written or "")
        if src is None or src.op != "call_function" or _returns_alias(src.target):
            continue
        aliases = _aliases(src.name, users, by_name, but=n.name)
        if aliases & outputs or any(u == "output" or order[u] > order[n.name]
                                    for a in aliases for u in users.get(a, []) if u != n.name):
            continue
        _, name, overload = n.target.split(".", 2)
        functional = name.rstrip("_")
        if not hasattr(getattr(torch.ops.aten, functional, None), overload):
            continue
        n.target, n.mutates = f"aten.{functional}.{overload}", []


def memory_order(graph: Graph) -> dict[str, list[str]]:
    """Edges (node -> nodes that must come after it) that keep each read of memory an in-place
    op writes on its side of the write, where no value flows between them: ``m.unsqueeze(0)
    .add_(1)`` writes ``m``, and ``m * 3`` after it must not share a kernel with what made
    ``m`` (nor ``m * 2`` before it one with ``m * 3``). The memory is every alias of the
    written tensor's base: the views of views it was taken through and any others."""
    by_name = {n.name: n for n in graph.nodes}
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    users = graph.users()
    edges: dict[str, list[str]] = {}
    for w in graph.calls():
        for written in [r for i in w.mutates if i < len(w.args) for r in _refs(w.args[i])]:
            base = written
            while base in by_name and by_name[base].op == "call_function" \
                    and _returns_alias(by_name[base].target):
                first = next(iter(_refs(by_name[base].args[:1])), None)
                if first is None:
                    break
                base = first
            aliases = _aliases(base, users, by_name)
            for a in aliases:
                for r in users.get(a, []):
                    if r == "output" or r == w.name or r in aliases:
                        continue
                    if order[r] < order[w.name]:
                        edges.setdefault(r, []).append(w.name)
                    else:
                        edges.setdefault(w.name, []).append(r)
    return edges


def _aliases(base: str, users: dict[str, list[str]], by_name: dict[str, Node],
             but: str = "") -> set[str]:
    """``base`` and everything that shares its memory: the views of it, views of those (not
    through the node ``but``)."""
    aliases, todo = {base}, [base]
    while todo:
        for u in users.get(todo.pop(), []):
            if u != but and u in by_name and u not in aliases \
                    and _returns_alias(by_name[u].target):
                aliases.add(u)
                todo.append(u)
    return aliases


def _returns_alias(target: str) -> bool:
    """The op's result may share memory with an input (views, ``to``, in-place ops), by its
    schema; unknown ops do."""
    import torch
    parts = target.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return True
    op = getattr(getattr(torch.ops.aten, parts[1], None), parts[2], None)
    schema = getattr(op, "_schema", None)
    if schema is None:
        return True
    return any(r.alias_info is not None for r in schema.returns)


def _refs(x: Any):
    """Node names referenced anywhere inside JSON args."""
    if isinstance(x, dict):
        if set(x) == {"node"}:
            yield x["node"]
        else:
            for v in x.values():
                yield from _refs(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _refs(v)


def _bind(x: Any, env: dict) -> Any:
    if hasattr(x, "op") and hasattr(x, "name") and hasattr(x, "meta"):
        return env[x.name]
    if isinstance(x, (list, tuple)):
        return type(x)(_bind(v, env) for v in x)
    if isinstance(x, dict):
        return {k: _bind(v, env) for k, v in x.items()}
    return x


# Elements of a lifted constant written into a program as a literal; a larger one is left where
# the model holds it (read by name), as is any the model holds.
LIFTED_VALUE_MOST = 4096


def _lifted_value(model: Any, fqn: str | None, constants: dict) -> Any:
    """A constant's value as nested lists, where ``model`` has nothing under its name (export
    lifted it from a tensor the forward made) and it is small; else None."""
    try:
        _attr(model, fqn)
        return None
    except AttributeError:
        pass
    t = constants.get(fqn)
    if t is None or not hasattr(t, "tolist") or t.numel() > LIFTED_VALUE_MOST:
        return None
    return t.detach().cpu().tolist()


def _attr(obj: Any, fqn: str | None) -> Any:
    for part in (fqn or "").split("."):
        obj = getattr(obj, part)
    return obj


def _flat_tensors(out: Any) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat_tensors(o)]
    return [out]


def _fmt_arg(a: Any) -> str:
    if isinstance(a, dict) and set(a) == {"node"}:
        return "%" + a["node"]
    if isinstance(a, dict) and len(a) == 1:
        return str(next(iter(a.values())))
    if isinstance(a, list):
        return "[" + ", ".join(_fmt_arg(v) for v in a) + "]"
    return repr(a)


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:300] if s else ""


def _si(v: float) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.2f} {unit}"
    return f"{v:g} "
