"""What the LLM agents put in front of the model: prompt files, problem context, retrieval.

The per-problem context (model source, graph summary, the hardware, the eager profile,
retrieved knowledge-base sections) is one text block that stays byte-identical across a
session's calls, so it is cached after the first request. The hardware and the eager timings
come from the session's facts (``facts``: measured once, recorded, the same on resume): the
device from ``doctor.device_facts`` and the reference's timings from the Verifier's own
baseline run, so the model reads the numbers its speedups are computed against. The per-op
breakdown comes from the graph's profile, as shares of the compute ops only.

Retrieval is judged on relevance: a section about GEMM epilogues is never shown for a model
without a GEMM, a CUDA section never for the CPU (``APPLIES``); the query names the op classes
and their techniques; a section tagged with one of the graph's own ops is ranked up
(``OP_TAG_BOOST``); hits far below the best are dropped (``RELATIVE_CUTOFF``). The test set
in ``tests/agents/test_llm_retrieval.py`` pins which sections must come first per problem.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import aten

if TYPE_CHECKING:
    from ...graph import Graph
    from ...problem import Problem

PROMPTS = Path(__file__).with_name("prompts")

SECTION_CHARS = 3000   # per retrieved section in a prompt
RELATIVE_CUTOFF = 0.3  # a hit scoring under this share of the best one is not shown
OP_TAG_BOOST = 1.5     # a section tagged with one of the graph's ops (softmax, layer_norm)

# Words a problem's op classes and ops add to the retrieval query: what the kernel needs.
CLASS_WORDS = {
    "pointwise": "fuse pointwise elementwise chain one pass",
    "reduction": "reduction along dim",
    "normalization": "normalization row mean variance",
    "gemm": "gemm epilogue bias",
    "convolution": "convolution epilogue",
    "rnn": "rnn recurrence gates time steps",
}
OP_WORDS = {
    "softmax": "softmax row max exp", "_softmax": "softmax row max exp",
    "log_softmax": "log_softmax logsumexp", "_log_softmax": "log_softmax logsumexp",
    "layer_norm": "layernorm welford rsqrt", "native_layer_norm": "layernorm welford rsqrt",
    "group_norm": "groupnorm group_norm", "native_group_norm": "groupnorm group_norm",
    "instance_norm": "instancenorm instance_norm", "rms_norm": "rmsnorm rsqrt",
    "rsqrt": "rmsnorm rsqrt",
    "batch_norm": "batchnorm running_mean eval", "_native_batch_norm_legit_no_training":
        "batchnorm running_mean eval", "_native_batch_norm_legit": "batchnorm train",
    "max_pool2d": "pooling window", "avg_pool2d": "pooling window",
    "adaptive_avg_pool2d": "pooling global average",
    "argmax": "argmax reduction", "amax": "max reduction", "sum": "sum reduction",
    "mean": "mean reduction",
}
DEVICE_WORDS = {"cuda": "cuda coalesced vectorized float4 grid-stride",
                "cuda-reduce": "cuda warp shuffle block reduce",
                "cpu": "cpu openmp simd"}

_LAYOUT = ("transpose", "permute", "t", "expand", "as_strided", "slice", "select", "narrow",
           "unfold", "movedim")
_POOLS = ("max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool")
_SOFTMAX = ("softmax", "_softmax", "log_softmax", "_log_softmax")
_NORMS = ("layer_norm", "native_layer_norm", "group_norm", "native_group_norm",
          "instance_norm", "rms_norm", "rsqrt")


def _facts(graph: Graph) -> dict[str, Any]:
    nodes = compute_nodes(graph)
    ops = {aten.short(n.target) for n in nodes}
    layout = {aten.short(n.target) for n in graph.nodes if n.op == "call_function"} & set(
        _LAYOUT)
    return {"classes": {n.op_class for n in nodes}, "ops": ops, "layout": layout,
            "cuda": graph.device.startswith("cuda"), "n": len(nodes),
            "half": any((n.dtype or "") in ("float16", "bfloat16", "torch.float16",
                                             "torch.bfloat16") for n in graph.nodes)}


def _has(*classes: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: bool(f["classes"] & set(classes))


def _op(*names: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: any(o.startswith(names) or o in names for o in f["ops"])


def _cuda(f: dict[str, Any]) -> bool:
    return f["cuda"]


# When a section can help at all; sections not listed always can. Measurement and
# verification notes describe the Verifier, not how to write the kernel: never retrieved.
APPLIES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "gemm-epilogues": _has("gemm"),
    "cublaslt-epilogues": lambda f: f["cuda"] and "gemm" in f["classes"],
    "tf32x3-split": lambda f: f["cuda"] and "gemm" in f["classes"],
    "tensor-cores-precision": lambda f: f["cuda"] and "gemm" in f["classes"],
    "conv-epilogue-fusion": _has("convolution"),
    "depthwise-convolution": _has("convolution"),
    "rnn-cell-fusion": _has("rnn"),
    "pooling-kernels": _op(*_POOLS),
    "batchnorm-train-eval": _op("batch_norm", "_native_batch_norm"),
    "softmax-kernels": _op(*_SOFTMAX),
    "layernorm-kernels": _op(*_NORMS),
    "non-contiguous-tensors": lambda f: bool(f["layout"]),
    "welford-online-softmax": lambda f: _op(*_SOFTMAX, *_NORMS)(f),
    "reduction-along-dim": _has("reduction"),
    "block-reductions": lambda f: f["cuda"] and bool(f["classes"] & {"reduction",
                                                                      "normalization"}),
    "warp-shuffle-reductions": lambda f: f["cuda"] and bool(
        f["classes"] & {"reduction", "normalization"}),
    "fp16-bf16-accuracy": lambda f: f["half"],
    "cpu-openmp-vectorization": lambda f: not f["cuda"],
    "launch-overhead": lambda f: f["cuda"] and f["n"] >= 4,
    "cuda-graphs": lambda f: f["cuda"] and (f["n"] >= 6 or "rnn" in f["classes"]),
    **{sid: _cuda for sid in (
        "vectorized-access", "memory-coalescing", "grid-stride-loops", "shared-memory-tiling",
        "bank-conflicts", "occupancy-launch-bounds", "hopper-h200-figures",
        "nvrtc-runtime-compilation", "streams-and-overlap", "ncu-metrics-roofline")},
    **{sid: (lambda f: False) for sid in (
        "timing-methodology", "l2-cache-and-flush", "anti-hacking-verification")},
}


@cache
def prompt(name: str) -> str:
    """A prompt file from prompts/ (``prompt("coder")`` reads prompts/coder.md)."""
    return (PROMPTS / f"{name}.md").read_text()


def lang_for(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "c"


def compute_nodes(graph: Graph) -> list[Any]:
    """The calls that compute (library or own kernels); views, copies and allocations do not."""
    return [n for n in graph.calls() if aten.computes(n.target)]


def rag_query(graph: Graph, extra: str = "") -> str:
    """Retrieval query: the graph's op classes and ops with the techniques they call for, the
    device's, and the plan's words (``extra``)."""
    words: list[str] = []

    def add(text: str) -> None:
        for w in text.split():
            if w not in words:
                words.append(w)

    nodes = compute_nodes(graph) or [n for n in graph.nodes if n.op == "call_function"]
    for n in nodes:
        op = aten.short(n.target)
        add(f"{n.op_class} {op}")
        add(OP_WORDS.get(op) or CLASS_WORDS.get(n.op_class, ""))   # the op's own words first
    reduces = any(n.op_class in ("reduction", "normalization") for n in nodes)
    device = ("cpu" if not graph.device.startswith("cuda") else
              "cuda-reduce" if reduces else "cuda")
    add(DEVICE_WORDS[device])
    return " ".join(words + ([extra] if extra else []))


def applicable(section_id: str, graph: Graph | None) -> bool:
    """Can the section help with this graph on its device (``APPLIES``)?"""
    rule = APPLIES.get(section_id)
    return graph is None or rule is None or bool(rule(_facts(graph)))


def retrieve(knowledge: Any, query: str, k: int, graph: Graph | None = None) -> list[dict[str, Any]]:
    """Top-k relevant sections as dicts {id, title, score, text}; [] without a knowledge base.

    With ``graph``, sections that cannot apply to it are skipped; hits under
    ``RELATIVE_CUTOFF`` of the best score are dropped.
    """
    if knowledge is None or k <= 0:
        return []
    ops = _facts(graph)["ops"] if graph is not None else set()
    ranked = []
    for h in knowledge.search(query, max(k * 4, 16)):
        get = h.get if isinstance(h, dict) else (lambda name, d=None, h=h: getattr(h, name, d))
        sid = str(get("id"))
        if not applicable(sid, graph):
            continue
        text = get("text", None) or get("snippet", "") or ""
        tags: set[str] = set()
        if hasattr(knowledge, "section"):   # the whole section, not just the snippet
            with contextlib.suppress(Exception):   # a hit without a section keeps its snippet
                section = knowledge.section(sid)
                text, tags = section.body, {t.lower() for t in section.tags}
        # a section written for one of the graph's own ops outranks general advice
        score = float(get("score", 0.0) or 0.0) * (OP_TAG_BOOST if ops & tags else 1.0)
        ranked.append((score, sid, get("title", "") or "", text))
    ranked.sort(key=lambda r: -r[0])
    hits: list[dict[str, Any]] = []
    for score, sid, title, text in ranked[:k]:
        if hits and score < RELATIVE_CUTOFF * hits[0]["score"]:
            break
        if len(text) > SECTION_CHARS:
            text = text[:SECTION_CHARS].rsplit("\n", 1)[0] + "\n..."
        hits.append({"id": sid, "title": title, "score": round(score, 3), "text": text})
    return hits


def default_knowledge() -> Any:
    """The project's knowledge base (agents/rag.py)."""
    from ..rag import KnowledgeBase
    return KnowledgeBase.load()


def problem_context(problem: Problem, graph: Graph, sections: list[dict[str, Any]],
                    facts: dict[str, Any] | None = None) -> str:
    """The cached per-problem block: source, graph, hardware, eager profile, sections."""
    facts = facts or {}
    parts = [(f"# Problem `{problem.name}` on device `{graph.device}` "
              f"(kernels in {lang_for(graph.device)!r})"),
             "## Reference model (KernelBench contract)", fence(problem.source, "python"),
             "## Captured ATen graph", graph.summary().rstrip()]
    if facts.get("device"):
        parts += ["## Hardware", hardware_text(facts["device"])]
    parts += ["## Eager profile", eager_profile(graph, facts.get("baseline"))]
    parts.append("## Knowledge-base sections (cite their ids in `refs`)")
    if sections:
        for s in sections:
            parts.append(f"### [{s['id']}] {s['title']}\n{s['text'].strip()}")
    else:
        parts.append("(none retrieved)")
    return "\n\n".join(parts) + "\n"


def hardware_text(d: dict[str, Any]) -> str:
    """The device's facts as the model reads them (``doctor.device_facts``)."""
    lines = [f"- {d.get('name', 'unknown device')}"
             + (f" (sm_{d['capability']})" if d.get("capability") else "")]
    if d.get("sms"):
        lines.append(f"- {d['sms']} SMs, {d.get('max_threads_per_sm', '?')} threads per SM, "
                     f"{d.get('shared_memory_per_block_kb', '?')} KB shared memory per block, "
                     f"L2 {d.get('l2_mb', '?')} MB")
    if d.get("cores"):
        lines.append(f"- {d['cores']} CPU cores for OpenMP"
                     + (f", {d['simd']}" if d.get("simd") else ""))
    if d.get("memory_gb"):
        lines.append(f"- {d['memory_gb']:.0f} GB memory")
    measured = []
    if d.get("bandwidth_gbs"):
        measured.append(f"memory bandwidth {d['bandwidth_gbs']:.0f} GB/s (copy)")
    for key, label in (("fp32_tflops", "fp32"), ("tf32_tflops", "TF32 tensor cores"),
                       ("fp16_tflops", "fp16 tensor cores")):
        if d.get(key):
            measured.append(f"{label} {d[key]:.1f} TFLOP/s")
    if measured:
        lines.append("- measured here: " + ", ".join(measured)
                     + "; a memory-bound kernel's floor is bytes moved / bandwidth")
    return "\n".join(lines)


def eager_profile(graph: Graph, baseline: dict[str, float] | None = None, top: int = 12) -> str:
    """The reference's time: the Verifier's numbers when known, then per-op shares."""
    lines = []
    eager = (baseline or {}).get("eager")
    if eager:
        lines.append(f"eager forward: {eager:.4g} ms, timed by the Verifier (L2 flushed, median "
                     "of its trials): the number every speedup is computed against")
        compiled = {k: v for k, v in (baseline or {}).items()
                    if k.startswith("compile:") and not k.endswith("_wall")}
        for mode, ms in sorted(compiled.items()):
            lines.append(f"torch.compile ({mode.split(':', 1)[1]}): {ms:.4g} ms")
        if graph.eager_ms and abs(math.log(graph.eager_ms / eager)) > math.log(2):
            lines.append(f"(the per-op profile below was taken in a separate profiled run "
                         f"({graph.eager_ms:.3g} ms); read it as shares, not times)")
    elif graph.eager_ms is not None:
        lines.append(f"eager forward: {graph.eager_ms:.3f} ms (one profiled run; the Verifier "
                     "times the reference again)")
    else:
        lines.append("eager forward: not measured")
    timed = [n for n in compute_nodes(graph) if getattr(n, "time_us", None)]
    total = sum(n.time_us for n in timed)
    for n in sorted(timed, key=lambda n: -n.time_us)[:top]:
        lines.append(f"- {n.name} ({n.target}, {n.op_class}, shape {n.shape}): "
                     f"{n.time_us / total:.0%} of the compute ops' time")
    if not timed:
        lines.append("(no per-op times; use flops/bytes from the graph)")
    return "\n".join(lines)


def fence(code: str, lang: str = "") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"
