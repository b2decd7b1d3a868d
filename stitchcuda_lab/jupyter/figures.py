"""Plotly figures over a Verdict's profile: timelines, per-kernel times, ncu throughput, history.

Every figure is built from plain data (``Verdict.profile`` rows ``{lane, name, start_us, dur_us,
cat}``), so the same figure shows in the panel, in a notebook output and in a saved HTML file.
Time axes are numeric microseconds (``go.Bar`` with ``base=start``), never dates.

The profile is one traced forward per side: with timing on, a forward made the timed way (cache
flush, fresh inputs, no checks), the median by length of several (``profile["protocol"]``); the
verdict's times are medians of timed forwards. ``agreement`` compares the two (each side's traced span against its timed median) and the
timeline draws the timed median beside the trace, so a bar that disagrees with the verdict is
seen as such instead of read as the speedup. The candidate's own kernels are rows of their own:
device kernels by name, C kernels on the CPU as the runtime's ``stitch::<kernel>`` ranges.
Gaps between a lane's top-level rows (host waiting, launch overhead) are drawn and measured.

>>> rows = [{"lane": "CPU", "name": "aten::relu", "start_us": 0.0, "dur_us": 5.0, "cat": "cpu_op"}]
>>> fig = timeline_figure({"reference": rows, "candidate": rows})
>>> fig.layout.xaxis.type
'linear'
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from .. import aten
from ..trace import span_us, timed_window_us

PLOTLY_MIME = "application/vnd.plotly.v1+json"

SIDES = ("reference", "candidate")
_SIDE_LABEL = {"reference": "reference", "candidate": "candidate"}
# One colour per category; GPU work stands out from host work.
_CAT_COLOR = {
    "kernel": "#2f6fdf",
    "gpu_memcpy": "#8c56c9",
    "gpu_memset": "#b07ad9",
    "cpu_op": "#e08a1e",
    "cuda_runtime": "#9aa0a6",
    "cuda_driver": "#c0c4c8",
    "python_function": "#c9b458",
    "user_annotation": "#1a7f37",     # the candidate's own C kernels (stitch::<kernel>)
    "gap": "#d0d7de",
    "timed median": "#6e7781",
}
# What each category is, in the legend.
_LEGEND = {
    "cpu_op": "cpu_op: aten op on the host",
    "kernel": "kernel: device kernel",
    "user_annotation": "stitch:: range: the candidate's kernel call",
    "cuda_runtime": "cuda_runtime: launch and sync calls",
    "gap": "gap: nothing running on the lane",
    "timed median": "timed median: the verdict's time",
}
_FALLBACK_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_HOST_WORK = ("cpu_op", "user_annotation")


def _color(cat: str, seen: dict[str, str]) -> str:
    if cat in _CAT_COLOR:
        return _CAT_COLOR[cat]
    if cat not in seen:
        seen[cat] = _FALLBACK_COLORS[len(seen) % len(_FALLBACK_COLORS)]
    return seen[cat]


def _rows(profile: Mapping[str, Any] | None, side: str) -> list[dict[str, Any]]:
    rows = (profile or {}).get(side) or []
    out = []
    for r in rows:
        try:
            out.append({"lane": str(r.get("lane", "?")), "name": str(r.get("name", "?")),
                        "start_us": float(r.get("start_us", 0.0)),
                        "dur_us": max(float(r.get("dur_us", 0.0)), 0.0),
                        "cat": str(r.get("cat", "") or "other")})
        except (TypeError, ValueError):
            continue  # a malformed row is dropped, not fatal for the picture
    return out


def timeline_rows(profile: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """Rows per side, each side shifted so its first event starts at 0 µs."""
    out = {}
    for side in SIDES:
        rows = _rows(profile, side)
        t0 = min((r["start_us"] for r in rows), default=0.0)
        out[side] = [{**r, "start_us": r["start_us"] - t0} for r in rows]
    return out


def timeline_figure(profile: Mapping[str, Any] | None, *, timings: Mapping[str, float] | None
                    = None, title: str = "Timeline") -> go.Figure:
    """CPU ops and kernels per lane, reference and candidate on one microsecond axis.

    Each side's lanes are labelled ``"reference · <lane>"`` / ``"candidate · <lane>"``; both
    sides start at 0 µs. With ``timings`` (the verdict's, in ms) each side gets a ``timed
    median`` lane whose bar is the verdict's time for that side: when the traced bars are much
    longer or shorter than it, the trace is not what the verdict measured. Gaps of at least 1%
    of a side's span between top-level rows of a lane are drawn as light ``gap`` bars.
    """
    sides = timeline_rows(profile)
    fig = go.Figure()
    extra: dict[str, str] = {}
    lanes: list[str] = []
    legend_seen: set[str] = set()
    timed = _timed_us(timings)
    for side in SIDES:
        side_lanes = sorted({r["lane"] for r in sides[side]}, key=_lane_key)
        if side in timed and sides[side]:
            lanes.append(f"{_SIDE_LABEL[side]} · timed median")
        lanes += [f"{_SIDE_LABEL[side]} · {lane}" for lane in side_lanes]
        by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in _with_depth(sides[side]):
            by_cat[r["cat"]].append(r)
        for r in gaps(sides[side]):
            by_cat["gap"].append({**r, "depth": 0})
        if side in timed and sides[side]:
            by_cat["timed median"].append({"lane": "timed median", "start_us": 0.0,
                                           "dur_us": timed[side], "depth": 0,
                                           "name": f"verdict: median forward {timed[side]:.1f} µs",
                                           "cat": "timed median"})
        for cat, rows in sorted(by_cat.items()):
            fig.add_trace(go.Bar(
                name=_LEGEND.get(cat, cat), legendgroup=cat, showlegend=cat not in legend_seen,
                orientation="h",
                base=[r["start_us"] for r in rows],
                x=[r["dur_us"] for r in rows],
                y=[f"{_SIDE_LABEL[side]} · {r['lane']}" for r in rows],
                customdata=[[r["name"], r["start_us"], r["dur_us"], side] for r in rows],
                hovertemplate=("%{customdata[0]}<br>%{customdata[3]}: "
                               "start %{customdata[1]:.1f} µs,"
                               " %{customdata[2]:.1f} µs<extra>" + cat + "</extra>"),
                width=[0.8 * 0.7 ** min(r["depth"], 4) for r in rows],
                marker={"color": _color(cat, extra), "line": {"width": 0},
                        **({"pattern": {"shape": "/"}} if cat == "gap" else {})},
                opacity=0.5 if cat == "gap" else None,
            ))
            legend_seen.add(cat)
    if not lanes:
        fig.add_annotation(text="no profile rows (profiling was off or the run failed)",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    spans = {side: span_us(sides[side]) for side in SIDES if sides[side]}
    sub = " · ".join(f"{side} traced {spans[side]:.0f} µs"
                     + (f" (timed median {timed[side]:.0f} µs)" if side in timed else "")
                     for side in spans)
    # reverse so the reference lanes sit on top
    fig.update_layout(
        # the title sits at the top of the figure, the legend (which may wrap) under it
        title={"text": title + (f"<br><sup>{sub}</sup>" if sub else ""), "yref": "container",
               "y": 1.0, "yanchor": "top", "pad": {"t": 26}},
        barmode="overlay", bargap=0.25,
        height=max(280, 150 + 34 * len(lanes)),
        margin={"l": 10, "r": 10, "t": 130, "b": 40},
        xaxis={"type": "linear", "title": {"text": "time since the side's first event (µs)"},
               "rangemode": "tozero"},
        yaxis={"type": "category", "categoryorder": "array",
               "categoryarray": list(reversed(lanes)), "automargin": True},
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "xanchor": "left"},
    )
    return fig


def _timed_us(timings: Mapping[str, float] | None) -> dict[str, float]:
    """The verdict's median forward per side in µs: eager for the reference, ours for the
    candidate (``timings`` are milliseconds)."""
    out = {}
    for side, key in (("reference", "eager"), ("candidate", "ours")):
        v = (timings or {}).get(key)
        if isinstance(v, (int, float)) and v > 0:
            out[side] = float(v) * 1000.0
    return out


def top_level(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows not nested inside another row of the same lane (what the lane spends time on)."""
    out = []
    end: dict[str, float] = {}
    for r in sorted(rows, key=lambda r: (r["lane"], r["start_us"], -r["dur_us"])):
        if r["start_us"] >= end.get(r["lane"], float("-inf")) - 1e-9:
            out.append(r)
            end[r["lane"]] = r["start_us"] + r["dur_us"]
    return out


def gaps(rows: list[dict[str, Any]], *, min_share: float = 0.01) -> list[dict[str, Any]]:
    """Idle stretches between top-level rows of each lane, at least ``min_share`` of the
    side's span long: host time outside any op, a device waiting for launches."""
    whole = span_us(rows)
    if whole <= 0:
        return []
    out = []
    by_lane: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in top_level(rows):
        by_lane[r["lane"]].append(r)
    for lane, rs in by_lane.items():
        for a, b in zip(rs, rs[1:]):
            start, gap = a["start_us"] + a["dur_us"], b["start_us"] - (a["start_us"] + a["dur_us"])
            if gap >= min_share * whole:
                out.append({"lane": lane, "name": f"gap: {gap:.1f} µs with nothing running "
                            f"on this lane", "start_us": start, "dur_us": gap, "cat": "gap"})
    return out


DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def agreement(profile: Mapping[str, Any] | None, timings: Mapping[str, float] | None
              ) -> dict[str, dict[str, float]]:
    """Per side: the traced span (µs), the verdict's timed median (µs) and their ratio.

    On a GPU the span is what the verdict's CUDA events measure (``trace.timed_window_us``):
    from the timer's start mark to the last device work, host gaps included; where the marks
    are missing, the device's span. The host's side of a profiled forward is not used there:
    it carries the profiler's own cost (2.5 ms of host span around 0.14 ms of kernels, seen
    on the H200). On the CPU the span is the whole traced forward."""
    sides = timeline_rows(profile)
    timed = _timed_us(timings)
    out = {}
    for side in SIDES:
        if side in timed and sides[side]:
            device = [r for r in sides[side] if r["cat"] in DEVICE_CATS]
            span = timed_window_us(sides[side]) or span_us(device or sides[side])
            out[side] = {"traced_us": span, "timed_us": timed[side],
                         "ratio": span / timed[side]}
    return out


def agreement_html(profile: Mapping[str, Any] | None, timings: Mapping[str, float] | None,
                   *, tolerance: float = 0.2) -> str:
    """One line under the verdict: do the timeline and the verdict's times agree?"""
    agree = agreement(profile, timings)
    if not agree:
        return ""
    parts = [f"{side} traced {a['traced_us']:.0f} µs vs timed median {a['timed_us']:.0f} µs "
             f"({a['ratio'] - 1:+.0%})" for side, a in agree.items()]
    off = [side for side, a in agree.items() if abs(a["ratio"] - 1) > tolerance]
    if off:
        gpu = any(r["cat"] in DEVICE_CATS for rows in timeline_rows(profile).values()
                  for r in rows)
        why = []
        if any(agree[side]["ratio"] > 1 for side in off):
            why.append("The profiler slows the host's side of a forward (each op and launch "
                       "it records), so a forward bound by its host looks longer traced than "
                       "timed." if gpu else
                       "The profiler adds its own cost to each op it records, and the host "
                       "may have been busier while the profiled calls ran.")
        if any(agree[side]["ratio"] < 1 for side in off):
            why.append("Traced shorter than timed: the profiled calls ran while the host was "
                       "quieter than during the timed ones.")
        if not gpu:
            why.append("On a CPU each side's profiled calls follow its own timed ones, in its "
                       "own process (the reference in the judge's, the candidate in its "
                       "sandbox), so a host whose load changes moves the two sides apart; "
                       "compare one side's bars with each other rather than across sides.")
        # one line, the why folded under it: six lines above every CPU verdict's timeline
        # read as a wall of warning
        return ("<div class='stitch-agreement' style='color:#9a6700'>⚠ The timeline does not "
                f"match the verdict's timing for {' and '.join(off)} ({'; '.join(parts)}): "
                "read the speedup from the verdict, the bars for the shape of the work."
                "<details><summary>why</summary>The timeline shows traced forwards, the "
                f"profiler's own cost included. {' '.join(why)} The bars show what runs, in "
                "which order, and the gaps.</details></div>")
    return (f"<div class='stitch-agreement'>The timeline agrees with the verdict's timing within "
            f"{tolerance:.0%}: {'; '.join(parts)}.</div>")


def _with_depth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``depth``: how many earlier rows on the same lane enclose them (an op's
    children draw as thinner bars inside it, like a flame graph). Sorted so parents come
    first, which also draws them underneath."""
    out = []
    open_: dict[str, list[float]] = defaultdict(list)   # lane -> end times of enclosing rows
    for r in sorted(rows, key=lambda r: (r["lane"], r["start_us"], -r["dur_us"])):
        stack = open_[r["lane"]]
        while stack and stack[-1] <= r["start_us"]:
            stack.pop()
        out.append({**r, "depth": len(stack)})
        stack.append(r["start_us"] + r["dur_us"])
    return out


def _lane_key(lane: str) -> tuple[int, str]:
    # host lanes first, then devices/streams, each in natural order
    low = lane.lower()
    host = low.startswith(("cpu", "host", "thread"))
    return (0 if host else 1, lane)


def kernel_stats(profile: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """Per side, ``[{name, calls, total_us}]`` longest first (see ``kernel_times``)."""
    profile = profile or {}
    out: dict[str, list[dict[str, Any]]] = {}
    for side in SIDES:
        rows = _rows(profile, side)
        gpu = [r for r in rows if r["cat"] in _KERNEL_CATS]
        pick = gpu or [r for r in top_level([r for r in rows if r["cat"] in _HOST_WORK])]
        totals: dict[str, list[float]] = {}
        for r in pick:
            t = totals.setdefault(kernel_name(r["name"]), [0, 0.0])
            t[0] += 1
            t[1] += r["dur_us"]
        if totals:
            out[side] = sorted(({"name": n, "calls": int(c), "total_us": d}
                                for n, (c, d) in totals.items()), key=lambda x: -x["total_us"])
    if out:
        return out
    summary = profile.get("kernels")
    if isinstance(summary, list) and isinstance(profile.get("reference_kernels"), list):
        # the Verifier's form: "kernels" for the candidate, "reference_kernels" beside it
        summary = {"candidate": summary, "reference": profile["reference_kernels"]}
    return {side: sorted(({"name": n, "calls": None, "total_us": us} for n, us in d.items()),
                         key=lambda x: -x["total_us"])
            for side, d in _parse_kernel_summary(summary).items()}


def kernel_times(profile: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """Total time per kernel name for each side, in µs.

    From the timeline rows: device kernels (and copies) when a side ran any; otherwise, on the
    CPU, the top-level host work of each lane: aten ops and the candidate's own C kernels
    (``stitch::<kernel>`` ranges, shown by kernel name). Without rows, the Verifier's
    ``kernels`` / ``reference_kernels`` summaries (``[{name, total_us}]``).
    """
    return {side: {k["name"]: k["total_us"] for k in ks}
            for side, ks in kernel_stats(profile).items()}


_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
# Ceilings measured on these machines (docs: /work/shared/FACTS.md), looked up by the device
# name a profile carries. bytes_per_s counts bytes read + written.
KNOWN_CEILINGS = {
    "H200": {"bytes_per_s": 4.3e12, "source": "device-to-device copy measured on an H200"},
}


def kernel_work(graph: Any, plan: Any = None, candidate: Any = None
                ) -> dict[str, dict[str, dict[str, float]]]:
    """Minimum bytes moved and FLOPs per kernel or op, per side, from the captured graph.

    Reference: each ``aten::<op>`` sums its nodes (``Node.bytes``, ``Node.flops``). Candidate:
    a kernel the offline Coder named ``k<i>_<task>`` covers that task's ops, so its minimum
    traffic is what the fused group reads from outside and what leaves it (intermediates stay
    in registers); ops the program still calls count as on the reference. Kernels the graph
    cannot account for (an LLM's own names) are left out rather than guessed.
    """
    out: dict[str, dict[str, dict[str, float]]] = {"reference": {}, "candidate": {}}
    if graph is None:
        return out
    nodes = {n.name: n for n in graph.nodes}
    calls = [n for n in graph.calls() if n.target != "getitem"]

    def add(side: str, key: str, nbytes: float, flops: float) -> None:
        d = out[side].setdefault(key, {"bytes": 0.0, "flops": 0.0})
        d["bytes"] += nbytes
        d["flops"] += flops

    for n in calls:
        add("reference", "aten::" + n.opname, n.bytes, n.flops)
    fused: set[str] = set()
    tasks = {t.id: t for t in (getattr(plan, "tasks", None) or [])}
    users = graph.users()
    for k in getattr(candidate, "kernels", None) or []:
        tid = k.name.split("_", 1)[1] if "_" in k.name else None
        task = tasks.get(tid)
        if task is None:
            continue
        members = [o for o in task.ops if o in nodes and nodes[o].op == "call_function"]
        if task.kind == "gemm_epilogue":   # the GEMM/conv stays a library call, not the kernel
            members = [o for o in members if not aten.is_library(str(nodes[o].target))]
        group = set(members)
        reads = {i for m in members for i in nodes[m].inputs() if i not in group and i in nodes}
        writes = {m for m in members if any(u not in group for u in users.get(m, []))}
        add("candidate", k.name, sum(_nbytes(nodes[i]) for i in reads | writes),
            sum(nodes[m].flops for m in members))
        fused |= group
    if candidate is not None:
        for n in calls:
            if n.name not in fused:
                add("candidate", "aten::" + n.opname, n.bytes, n.flops)
    return out


def _nbytes(n: Any) -> float:
    if n.shape is None:
        return 0.0
    size = 1
    for d in n.shape:
        size *= int(d)
    return float(size * _ITEMSIZE.get(str(n.dtype), 4))


def ceilings(profile: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The machine's ceilings (``bytes_per_s``, ``flops_per_s``) when the profile names them
    (``profile["ceilings"]``) or names a device this module knows; None when unknown."""
    profile = profile or {}
    c = profile.get("ceilings")
    if isinstance(c, Mapping) and any(isinstance(c.get(k), (int, float))
                                      for k in ("bytes_per_s", "flops_per_s")):
        return dict(c)
    name = str(profile.get("device_name") or "")
    for key, known in KNOWN_CEILINGS.items():
        if key.lower() in name.lower():
            return dict(known)
    return None


def _shown(profile: Mapping[str, Any] | None) -> str:
    """Which forward a side's trace is, in words (older verdicts carry no ``protocol``)."""
    how = (profile or {}).get("protocol") or {}
    if how.get("timed"):
        return f"a timed forward, the median of {how.get('calls', 1)} profiled"
    return "one checked forward"


def kernel_table_html(profile: Mapping[str, Any] | None, *, work: Mapping[str, Any] | None = None,
                      ceilings: Mapping[str, Any] | None = None) -> str:
    """Time per kernel with achieved bandwidth and FLOP rate (and % of the machine's ceiling
    where it is known): one table per side, the candidate first."""
    stats = kernel_stats(profile)
    work = work or {}
    if not stats:
        return "<i>No per-kernel times: profiling was off or the run failed.</i>"
    bw_max = (ceilings or {}).get("bytes_per_s")
    fl_max = (ceilings or {}).get("flops_per_s")
    parts = []
    for side in ("candidate", "reference"):
        ks = stats.get(side)
        if not ks:
            continue
        whole = sum(k["total_us"] for k in ks) or 1.0
        body = []
        for k in ks[:15]:
            w = (work.get(side) or {}).get(k["name"], {})
            # the work is the forward's (every node of the op), so is the time: all its calls
            sec = k["total_us"] * 1e-6
            bw = w["bytes"] / sec if w.get("bytes") and sec > 0 else None
            fl = w["flops"] / sec if w.get("flops") and sec > 0 else None
            cells = [f"<code>{html.escape(_short(k['name']))}</code>",
                     str(k["calls"] if k["calls"] is not None else "-"),
                     f"{k['total_us']:.1f}", f"{k['total_us'] / whole:.0%}",
                     _si(w.get("bytes"), "B"), _si(bw, "B/s"), _si(w.get("flops"), "FLOP"),
                     _si(fl, "FLOP/s")]
            if bw_max or fl_max:
                pct = []
                if bw and bw_max:
                    pct.append(f"{bw / bw_max:.0%} of {_si(bw_max, 'B/s')}")
                if fl and fl_max:
                    pct.append(f"{fl / fl_max:.0%} of {_si(fl_max, 'FLOP/s')}")
                cells.append(", ".join(pct) or "-")
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        head = ["kernel / op", "calls", "total µs", "share", "min bytes", "achieved",
                "FLOPs", "achieved"] + (["vs ceiling"] if bw_max or fl_max else [])
        parts.append(f"<div><b>{side}</b> ({_shown(profile)})<table class='stitch-kernels'>"
                     "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>"
                     f"<tbody>{''.join(body)}</tbody></table></div>")
    note = ("" if bw_max or fl_max else
            "<small>The machine's bandwidth and FLOP ceilings are not known for this run, so "
            "rates are shown without a percentage.</small>")
    return "<div class='stitch-kernel-table'><b>Time per kernel</b>" + "".join(parts) + note + \
        "</div>"


def samples_html(profile: Mapping[str, Any] | None) -> str:
    """Where the candidate's threads were in its timed calls, by the judge's samples from
    outside its process (CPU: ``profile["samples"]``, verifier/sampler.py): a share per kind
    of code, with the places seen most. Empty where nothing was sampled."""
    s = (profile or {}).get("samples") or {}
    kinds = {k: n for k, n in (s.get("kinds") or {}).items() if n}
    if not kinds:
        return ""
    total = sum(kinds.values())
    labels, where = s.get("labels") or {}, s.get("where") or {}
    body = "".join(
        f"<tr><td>{html.escape(str(labels.get(k, k)))}</td><td>{n}</td><td>{n / total:.0%}</td>"
        f"<td>{', '.join(f'<code>{html.escape(_short(str(w), 40))}</code>' for w in where.get(k, {}))}"
        "</td></tr>" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return ("<div class='stitch-samples'><b>Where the candidate's threads were</b> "
            f"<small>({total} samples at {s.get('stops', '?')} moments the Verifier drew in "
            "its timed calls, taken from outside its process; what the profiler inside it "
            "cannot be made to miss)</small><table class='stitch-kernels'><thead><tr>"
            "<th>code</th><th>samples</th><th>share</th><th>seen most in</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _si(x: float | None, unit: str) -> str:
    if x is None or x == 0:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def kernel_name(name: str) -> str:
    """``stitch::k0_t1`` (the runtime's range around a C kernel call) -> ``k0_t1``."""
    return name[len("stitch::"):] if name.startswith("stitch::") else name


def _parse_kernel_summary(summary: Any) -> dict[str, dict[str, float]]:
    """Accepts ``{side: [{name, total_us|dur_us|time_us}]}``, ``{side: {name: us}}`` or
    ``[{name, side?, total_us}]``; returns ``{side: {name: us}}`` or {} when unrecognised."""
    def total(d: Mapping[str, Any]) -> float | None:
        for key in ("total_us", "dur_us", "time_us", "self_us", "us"):
            if isinstance(d.get(key), (int, float)):
                return float(d[key])
        return None

    out: dict[str, dict[str, float]] = defaultdict(dict)
    if isinstance(summary, Mapping):
        for side, items in summary.items():
            if side not in SIDES:
                continue
            if isinstance(items, Mapping):
                for name, v in items.items():
                    if isinstance(v, (int, float)):
                        out[side][str(name)] = float(v)
                    elif isinstance(v, Mapping) and (t := total(v)) is not None:
                        out[side][str(name)] = t
            elif isinstance(items, list):
                for d in items:
                    if isinstance(d, Mapping) and (t := total(d)) is not None:
                        name = str(d.get("name", "?"))
                        out[side][name] = out[side].get(name, 0.0) + t
    elif isinstance(summary, list):
        for d in summary:
            if isinstance(d, Mapping) and (t := total(d)) is not None:
                side = d.get("side", "candidate")
                if side in SIDES:
                    name = str(d.get("name", "?"))
                    out[side][name] = out[side].get(name, 0.0) + t
    return dict(out)


def kernel_figure(profile: Mapping[str, Any] | None, *, top: int = 15,
                  title: str = "Time per kernel") -> go.Figure:
    """Horizontal bars: total time per kernel (or op), reference vs candidate."""
    times = kernel_times(profile)
    fig = go.Figure()
    for side in SIDES:
        items = sorted(times.get(side, {}).items(), key=lambda kv: -kv[1])[:top]
        if not items:
            continue
        fig.add_trace(go.Bar(
            name=side, orientation="h",
            x=[v for _, v in items], y=[_short(n) for n, _ in items],
            customdata=[n for n, _ in items],
            hovertemplate="%{customdata}<br>%{x:.1f} µs<extra>" + side + "</extra>",
            marker={"color": "#9aa0a6" if side == "reference" else "#2f6fdf"},
        ))
    if not fig.data:
        fig.add_annotation(text="no kernel times recorded", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    n = sum(len(tr.y) for tr in fig.data)
    fig.update_layout(title=title, barmode="group", height=max(220, 80 + 22 * n),
                      margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      xaxis={"type": "linear", "title": {"text": "total time (µs)"}},
                      yaxis={"automargin": True, "autorange": "reversed"})
    return fig


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def ncu_rows(ncu: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Per-kernel throughput rows ``{name, dram_pct, sm_pct, dur_us}`` from the ncu section."""
    if not ncu:
        return []
    items: Iterable[Any] = ()
    for key in ("kernels", "rows", "metrics"):
        if isinstance(ncu.get(key), list):
            items = ncu[key]
            break
    out = []
    for d in items:
        if not isinstance(d, Mapping):
            continue
        row: dict[str, Any] = {"name": str(d.get("name") or d.get("kernel") or "?"),
                               "dram_pct": None, "sm_pct": None, "dur_us": None}
        for k, v in d.items():
            if not isinstance(v, (int, float)):
                continue
            kl = k.lower()
            if "dram" in kl or "memory" in kl or kl.startswith("mem"):
                row["dram_pct"] = float(v)
            elif kl.startswith("sm") or "compute" in kl:
                row["sm_pct"] = float(v)
            elif "duration" in kl or kl in ("dur_us", "time_us"):
                row["dur_us"] = float(v)
        if row["dram_pct"] is not None or row["sm_pct"] is not None:
            out.append(row)
    return out


def ncu_note(ncu: Mapping[str, Any] | None, device: str = "") -> str | None:
    """Why there is no ncu chart, or None when there is one."""
    if ncu_rows(ncu):
        return None
    if device and not str(device).startswith("cuda"):
        return ("No Nsight Compute data: this run was on the CPU; ncu measures GPU kernels "
                "(run with --device cuda and the ncu setting on).")
    for key in ("reason", "error", "note", "skipped"):
        if ncu and isinstance(ncu.get(key), str) and ncu[key]:
            return f"No Nsight Compute data: {ncu[key]}"
    return ("No Nsight Compute data: ncu was not run for this candidate "
            "(turn it on with `%config StitchMagics.ncu = True` or STITCH_NCU=1; it is slow).")


def ncu_figure(ncu: Mapping[str, Any] | None, *, title: str = "Nsight Compute throughput"
               ) -> go.Figure | None:
    """Memory (DRAM) and compute (SM) throughput as % of peak per kernel; None without data."""
    rows = ncu_rows(ncu)
    if not rows:
        return None
    names = [_short(r["name"]) for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(name="DRAM % of peak", orientation="h", y=names,
                         x=[r["dram_pct"] or 0.0 for r in rows], marker={"color": "#8c56c9"}))
    fig.add_trace(go.Bar(name="SM % of peak", orientation="h", y=names,
                         x=[r["sm_pct"] or 0.0 for r in rows], marker={"color": "#2f6fdf"}))
    fig.update_layout(title=title, barmode="group", height=max(220, 80 + 44 * len(rows)),
                      margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      xaxis={"type": "linear", "range": [0, 100],
                             "title": {"text": "% of peak sustained"}},
                      yaxis={"automargin": True, "autorange": "reversed"})
    return fig


def history_figure(points: Sequence[Mapping[str, Any]], *, title: str = "Speedup per iteration"
                   ) -> go.Figure:
    """Every verified candidate as a dot at its iteration (your edits as diamonds, named in the
    legend; failures as crosses on the axis, side by side where an iteration has several) and
    the best passing speedup so far as a line. ``points`` are
    ``{iteration, speedup_vs_eager, speedup_vs_compile, status, candidate_id, origin}``."""
    fig = go.Figure()
    its = [p.get("iteration", i) for i, p in enumerate(points)]
    for key, label, color in (("speedup_vs_eager", "vs eager", "#2f6fdf"),
                              ("speedup_vs_compile", "vs torch.compile", "#e08a1e")):
        ok = [(it, p) for it, p in zip(its, points) if p.get(key) is not None]
        if not ok:
            continue
        fig.add_trace(go.Scatter(
            x=[it for it, _ in ok], y=[p[key] for _, p in ok], mode="markers", name=label,
            legendgroup=label, marker={"color": color, "size": 9, "symbol": [
                ("diamond" if p.get("origin") == "user" else "circle")
                + ("" if p.get("steady", True) else "-open") for _, p in ok]},
            customdata=[[p.get("candidate_id", ""), p.get("origin", ""),
                         "" if p.get("steady", True) else
                         "<br>timed while the host's load moved: ranked below steady ones"]
                        for _, p in ok],
            hovertemplate="iteration %{x}: %{y:.2f}x<br>%{customdata[0]} (%{customdata[1]})"
                          "%{customdata[2]}<extra>" + label + "</extra>"))
        # the best so far as the session ranks it: a verdict timed while the host's load
        # moved counts only where no steady one has come yet (loop._best)
        xs: list[float] = []
        ys: list[float] = []
        for it in sorted({i for i, _ in ok}):
            upto = [p for i, p in ok if i <= it]
            steady = [p[key] for p in upto if p.get("steady", True)]
            xs.append(it)
            ys.append(max(steady) if steady else max(p[key] for p in upto))
        if len(xs) == 1:   # one iteration: a short level line, not a line of one point
            xs, ys = [xs[0] - 0.2, xs[0] + 0.2], ys * 2
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"best so far {label}",
                                 legendgroup=label, line={"color": color, "shape": "hv"},
                                 hoverinfo="skip"))
    if any(p.get("origin") == "user" for p in points):
        # what the diamonds are, in the legend (a marker symbol per point has no entry): an
        # open one, since an edit's diamond takes the colour of its series (a grey filled one
        # read as a colour no point had)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers",
                                 name="your edits (diamonds, in each series' colour)",
                                 marker={"color": "#57606a", "symbol": "diamond-open",
                                         "size": 9}, hoverinfo="skip"))
    failed = [(it, p) for it, p in zip(its, points) if p.get("status") not in (None, "pass")]
    if failed:
        fig.add_trace(go.Scatter(
            x=_spread([it for it, _ in failed]), y=[0.0] * len(failed), mode="markers",
            name="failed (on the axis)", marker={"color": "#cf222e", "symbol": "x", "size": 9},
            cliponaxis=False,   # on the axis line (y = 0): drawn whole, not halved
            customdata=[[it, p.get("candidate_id", ""), p.get("status", "")]
                        for it, p in failed],
            hovertemplate="iteration %{customdata[0]}: %{customdata[1]} %{customdata[2]}"
                          "<extra></extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="#9aa0a6")
    if not points:
        fig.add_annotation(text="no verified candidates yet", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_layout(title=title, height=300, margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      xaxis={"type": "linear", "title": {"text": "iteration"}, "dtick": 1,
                             "range": [-0.25, max([1, *its]) + 0.25]},
                      yaxis={"type": "linear", "title": {"text": "speedup (x, 1 = eager)"},
                             "rangemode": "tozero"})
    return fig


def _spread(xs: list[float], step: float = 0.12) -> list[float]:
    """Points at the same x moved apart side by side (centred on it), so that several
    failures of one iteration show as several crosses, not one."""
    seen: dict[float, int] = {}
    for x in xs:
        seen[x] = seen.get(x, 0) + 1
    placed: dict[float, int] = {}
    out = []
    for x in xs:
        k = placed.get(x, 0)
        placed[x] = k + 1
        out.append(x + (k - (seen[x] - 1) / 2) * step)
    return out


def mimebundle(fig: go.Figure) -> dict[str, Any]:
    """The figure as a display bundle: plotly JSON (rendered by JupyterLab) plus a text line."""
    import json
    spec = json.loads(fig.to_json())
    spec["config"] = {"displaylogo": False, "responsive": True}
    title = fig.layout.title.text or "figure"
    return {PLOTLY_MIME: spec, "text/plain": f"<plotly figure: {title}, {len(fig.data)} traces>"}
