"""Plotly figures over a Verdict's profile: timelines, per-kernel times, ncu throughput, history.

Every figure is built from plain data (``Verdict.profile`` rows ``{lane, name, start_us, dur_us,
cat}``), so the same figure shows in the panel, in a notebook output and in a saved HTML file.
Time axes are numeric microseconds (``go.Bar`` with ``base=start``), never dates.

>>> rows = [{"lane": "CPU", "name": "aten::relu", "start_us": 0.0, "dur_us": 5.0, "cat": "cpu_op"}]
>>> fig = timeline_figure({"reference": rows, "candidate": rows})
>>> fig.layout.xaxis.type
'linear'
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import plotly.graph_objects as go

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
}
_FALLBACK_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


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


def timeline_figure(profile: Mapping[str, Any] | None, *, title: str = "Timeline") -> go.Figure:
    """CPU ops and GPU kernels per lane, reference and candidate on one microsecond axis.

    Each side's lanes are labelled ``"reference · <lane>"`` / ``"candidate · <lane>"``; both
    sides start at 0 µs so their lengths compare directly.
    """
    sides = timeline_rows(profile)
    fig = go.Figure()
    extra: dict[str, str] = {}
    lanes: list[str] = []
    legend_seen: set[str] = set()
    for side in SIDES:
        side_lanes = sorted({r["lane"] for r in sides[side]}, key=_lane_key)
        lanes += [f"{_SIDE_LABEL[side]} · {lane}" for lane in side_lanes]
        by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in _with_depth(sides[side]):
            by_cat[r["cat"]].append(r)
        for cat, rows in sorted(by_cat.items()):
            fig.add_trace(go.Bar(
                name=cat, legendgroup=cat, showlegend=cat not in legend_seen,
                orientation="h",
                base=[r["start_us"] for r in rows],
                x=[r["dur_us"] for r in rows],
                y=[f"{_SIDE_LABEL[side]} · {r['lane']}" for r in rows],
                customdata=[[r["name"], r["start_us"], r["dur_us"], side] for r in rows],
                hovertemplate=("%{customdata[0]}<br>%{customdata[3]}: "
                               "start %{customdata[1]:.1f} µs,"
                               " %{customdata[2]:.1f} µs<extra>" + cat + "</extra>"),
                width=[0.8 * 0.7 ** min(r["depth"], 4) for r in rows],
                marker={"color": _color(cat, extra), "line": {"width": 0}},
            ))
            legend_seen.add(cat)
    if not lanes:
        fig.add_annotation(text="no profile rows (profiling was off or the run failed)",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    # reverse so the reference lanes sit on top
    fig.update_layout(
        title=title, barmode="overlay", bargap=0.25,
        height=max(220, 60 + 34 * len(lanes)),
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        xaxis={"type": "linear", "title": {"text": "time (µs)"}, "rangemode": "tozero"},
        yaxis={"type": "category", "categoryorder": "array",
               "categoryarray": list(reversed(lanes)), "automargin": True},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


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


def kernel_times(profile: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """Total device time per kernel name for each side, in µs.

    Uses the Verifier's ``kernels`` / ``reference_kernels`` summaries (``[{name, total_us}]``)
    when there are any, otherwise sums the
    timeline rows of GPU categories (on a CPU run: the ``cpu_op`` rows of the top level lane).
    """
    profile = profile or {}
    summary = profile.get("kernels")
    if isinstance(summary, list) and isinstance(profile.get("reference_kernels"), list):
        # the Verifier's form: "kernels" for the candidate, "reference_kernels" beside it
        summary = {"candidate": summary, "reference": profile["reference_kernels"]}
    parsed = _parse_kernel_summary(summary)
    if parsed:
        return parsed
    out: dict[str, dict[str, float]] = {}
    for side in SIDES:
        rows = _rows(profile, side)
        gpu = [r for r in rows if r["cat"] in _KERNEL_CATS]
        pick = gpu or [r for r in rows if r["cat"] == "cpu_op"]
        totals: dict[str, float] = defaultdict(float)
        for r in pick:
            totals[r["name"]] += r["dur_us"]
        out[side] = dict(totals)
    return out


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
                    elif isinstance(v, Mapping) and total(v) is not None:
                        out[side][str(name)] = total(v)  # type: ignore[assignment]
            elif isinstance(items, list):
                for d in items:
                    if isinstance(d, Mapping) and total(d) is not None:
                        name = str(d.get("name", "?"))
                        out[side][name] = out[side].get(name, 0.0) + total(d)  # type: ignore
    elif isinstance(summary, list):
        for d in summary:
            if isinstance(d, Mapping) and total(d) is not None:
                side = d.get("side", "candidate")
                if side in SIDES:
                    name = str(d.get("name", "?"))
                    out[side][name] = out[side].get(name, 0.0) + total(d)  # type: ignore
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
        row = {"name": str(d.get("name") or d.get("kernel") or "?"), "dram_pct": None,
               "sm_pct": None, "dur_us": None}
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


def history_figure(points: list[Mapping[str, Any]], *, title: str = "Speedup per iteration"
                   ) -> go.Figure:
    """Best speedup per iteration; ``points`` are ``{iteration, speedup_vs_eager,
    speedup_vs_compile, status, candidate_id}``. Failed candidates show as 0."""
    fig = go.Figure()
    its = [p.get("iteration", i) for i, p in enumerate(points)]
    for key, label, color in (("speedup_vs_eager", "vs eager", "#2f6fdf"),
                              ("speedup_vs_compile", "vs torch.compile", "#e08a1e")):
        ys = [p.get(key) for p in points]
        if all(y is None for y in ys):
            continue
        fig.add_trace(go.Scatter(
            x=its, y=[y if y is not None else None for y in ys], mode="lines+markers",
            name=label, line={"color": color},
            customdata=[[p.get("candidate_id", ""), p.get("status", "")] for p in points],
            hovertemplate="iteration %{x}: %{y:.2f}x<br>%{customdata[0]} %{customdata[1]}"
                          "<extra>" + label + "</extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="#9aa0a6")
    if not points:
        fig.add_annotation(text="no verified candidates yet", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_layout(title=title, height=280, margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      xaxis={"type": "linear", "title": {"text": "iteration"}, "dtick": 1,
                             "range": [-0.25, max([1, *its]) + 0.25]},
                      yaxis={"type": "linear", "title": {"text": "speedup (x)"},
                             "rangemode": "tozero"})
    return fig


def mimebundle(fig: go.Figure) -> dict[str, Any]:
    """The figure as a display bundle: plotly JSON (rendered by JupyterLab) plus a text line."""
    import json
    spec = json.loads(fig.to_json())
    spec["config"] = {"displaylogo": False, "responsive": True}
    title = fig.layout.title.text or "figure"
    return {PLOTLY_MIME: spec, "text/plain": f"<plotly figure: {title}, {len(fig.data)} traces>"}
