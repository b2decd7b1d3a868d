"""The bench's chart: ours against eager and against torch.compile, one row per problem.

Dots on a log axis rather than bars: a ratio of 0.8x and one of 1.25x stand equally far from
the dotted line at 1x, and nothing is drawn from an arbitrary baseline. One row per problem,
its name read across (44 KernelBench names under a chart, tilted, left it 60 pixels of
height), the suite before it where the run holds several.

Two renderings of the same chart: ``results.html`` (plotly, interactive; plotly.js comes from
its CDN, so it draws nothing offline) and ``results.svg`` (drawn here, no script: it opens in
any browser offline and shows in a README).
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

NAME_CHARS = 44   # a problem's label, at most (KernelBench's names run to 80)
KEPT = " (kept)"   # after the label of a row whose program is the reference
SERIES = (("speedup_vs_eager", "ours vs eager", "#636efa"),
          ("speedup_vs_compile", "ours vs torch.compile", "#ef553b"),
          ("speedup_vs_best_compile", "ours vs fastest mode", "#00a06b"))
SYMBOLS = ("circle", "diamond", "triangle-up")


def series_of(result: dict) -> tuple:
    """The ratios drawn: against eager and torch.compile ``default``, and against the fastest
    compile mode where the run timed more than one (a row ahead of ``default`` may be behind
    ``max-autotune``; with one mode the third would sit on the second)."""
    modes = [m for m in str(result.get("modes") or "").split(",") if m]
    return SERIES if len(modes) > 1 else SERIES[:2]


def labels(result: dict) -> list[str]:
    rows = result["rows"]
    suites = {r.get("suite") for r in rows}

    def label(r: dict) -> str:
        name = r["problem"].removesuffix(".py")
        if len(name) > NAME_CHARS:
            name = name[:NAME_CHARS - 1] + "…"
        if r.get("kept_reference"):   # its 1.00x is the reference's, not a kernel of ours
            name += KEPT
        return f"{r.get('suite')} · {name}" if len(suites) > 1 and r.get("suite") else name

    return [label(r) for r in rows]


def title(result: dict) -> str:
    return f"Speedup on {result['environment'].get('device')}"


def figure(result: dict):
    """The chart as a plotly figure."""
    import plotly.graph_objects as go
    rows, names = result["rows"], labels(result)
    fig = go.Figure([go.Scatter(name=name, y=names, x=[r.get(key) for r in rows],
                                mode="markers", marker={"size": 10, "symbol": symbol})
                     for (key, name, _), symbol in zip(series_of(result), SYMBOLS)])
    fig.add_vline(x=1.0, line_dash="dot")
    ticks = [0.25, 0.5, 1, 2, 4, 8, 16]
    fig.update_layout(title=title(result),
                      xaxis={"title": "speedup (x, log scale)", "type": "log",
                             "tickvals": ticks, "ticktext": [f"{t:g}x" for t in ticks]},
                      yaxis={"autorange": "reversed"}, legend={"orientation": "h", "y": 1.02,
                                                                "yanchor": "bottom"},
                      height=160 + 24 * len(rows), margin={"l": 20})
    return fig


# the SVG's geometry, in pixels: a row's height, a label's character (an 11 px monospace font:
# 6.6 px in a browser, 7.2 px as cairosvg draws DejaVu Sans Mono, whose labels lost their
# first letters at 6.8), the plot's width, the space above the rows (title, legend) and below
ROW, CHAR, PLOT, TOP, BOTTOM = 22, 7.4, 520, 64, 44


def svg(result: dict) -> str:
    """The chart as a standalone SVG document."""
    rows, names, drawn_series = result["rows"], labels(result), series_of(result)
    values = [r.get(k) for r in rows for k, _, _ in drawn_series]
    shown = [v for v in values if _drawable(v)]
    lo = 2.0 ** math.floor(math.log2(min(shown + [0.5])))
    hi = 2.0 ** math.ceil(math.log2(max(shown + [2.0])))
    left = 16 + CHAR * max([len(n) for n in names] + [10])
    width, height = left + PLOT + 24, TOP + ROW * len(rows) + BOTTOM

    def x(v: float) -> float:
        return left + PLOT * (math.log2(v) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
           f'viewBox="0 0 {width:.0f} {height}" font-family="DejaVu Sans Mono, Menlo, '
           'Consolas, monospace" font-size="11">',
           f'<rect width="{width:.0f}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="15" font-family="sans-serif">'
           f'{escape(title(result))}</text>']
    for i, (_, name, colour) in enumerate(drawn_series):   # the legend
        at = left + PLOT / len(drawn_series) * i
        out.append(_marker(i, at + 6, 44, colour))
        out.append(f'<text x="{at + 16}" y="48">{escape(name)}</text>')
    bottom = TOP + ROW * len(rows)
    tick = lo
    while tick <= hi:   # a grid line and a label at each power of two
        dash = ' stroke-dasharray="4 3" stroke="#444"' if tick == 1 else ' stroke="#ddd"'
        out.append(f'<line x1="{x(tick):.1f}" y1="{TOP - 4}" x2="{x(tick):.1f}" '
                   f'y2="{bottom}"{dash}/>')
        out.append(f'<text x="{x(tick):.1f}" y="{bottom + 16}" text-anchor="middle">'
                   f'{tick:g}x</text>')
        tick *= 2
    out.append(f'<text x="{left + PLOT / 2}" y="{bottom + 36}" text-anchor="middle">'
               'speedup (x, log scale)</text>')
    for j, (r, name) in enumerate(zip(rows, names)):
        y = TOP + ROW * j + ROW / 2
        if j % 2:
            out.append(f'<rect x="8" y="{y - ROW / 2}" width="{left + PLOT - 8}" '
                       f'height="{ROW}" fill="#f4f4f8"/>')
        out.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(name)}</text>')
        drawn = [(i, series, colour, r.get(key)) for i, (key, series, colour)
                 in enumerate(drawn_series) if _drawable(r.get(key))]
        for i, series, colour, v in drawn:
            out.append(_marker(i, x(v), y, colour, f"{series}: {v:.2f}x"))
        if not drawn:   # an empty row says why it is empty (the table has the details)
            out.append(f'<text x="{left + 6}" y="{y + 4}" fill="#888">'
                       f'{escape(str(r.get("status") or "no ratio"))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _drawable(v: object) -> bool:
    """A ratio the log axis can place: a finite positive number."""
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _marker(i: int, cx: float, cy: float, colour: str, tip: str = "") -> str:
    """A circle (series 0), a diamond (1) or a triangle (2), with a hover title."""
    inner = f"<title>{escape(tip)}</title>" if tip else ""
    if i == 0:
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{colour}">{inner}</circle>'
    if i == 2:
        points = f"{cx:.1f},{cy - 6:.1f} {cx + 6:.1f},{cy + 5:.1f} {cx - 6:.1f},{cy + 5:.1f}"
        return f'<polygon points="{points}" fill="{colour}">{inner}</polygon>'
    points = f"{cx:.1f},{cy - 6:.1f} {cx + 6:.1f},{cy:.1f} {cx:.1f},{cy + 6:.1f} " \
             f"{cx - 6:.1f},{cy:.1f}"
    return f'<polygon points="{points}" fill="{colour}">{inner}</polygon>'


def write(result: dict, stem: Path) -> list[Path]:
    """``stem``.svg, and ``stem``.html where plotly is installed: the files written."""
    written = [stem.with_suffix(".svg")]
    written[0].write_text(svg(result), encoding="utf-8")
    try:
        figure(result).write_html(str(stem.with_suffix(".html")), include_plotlyjs="cdn")
        written.append(stem.with_suffix(".html"))
    except ImportError:
        pass
    return written
