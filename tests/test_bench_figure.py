"""The bench's chart: one problem a row, both renderings (plotly, SVG) from one result."""
import re
import xml.etree.ElementTree as ET

from stitchcuda_lab import bench_figure

NS = "{http://www.w3.org/2000/svg}"


def kernelbench_like(n: int = 44) -> dict:
    rows = [{"problem": f"{i}_" + "x" * 70 + ".py", "suite": f"level{1 + i % 2}",
             "speedup_vs_eager": 1.5, "speedup_vs_compile": 0.9} for i in range(n)]
    return {"rows": rows, "environment": {"device": "H200"}}


def test_the_figure_reads_one_problem_a_row_however_many_there_are():
    """44 KernelBench names tilted under a chart left it 60 pixels of height: one row per
    problem, names across, long ones cut, the suite before each where there are several."""
    result = kernelbench_like()
    rows = result["rows"]
    fig = bench_figure.figure(result)
    names = list(fig.data[0].y)
    assert len(names) == 44 and list(fig.data[0].x) == [1.5] * 44
    assert all(len(n) <= bench_figure.NAME_CHARS + len("level1 · ") for n in names)
    kept = bench_figure.labels(dict(result, rows=[dict(rows[0], kept_reference=True),
                                                  rows[1]]))
    assert kept[0].endswith(bench_figure.KEPT) and not kept[1].endswith(bench_figure.KEPT)
    assert names[0].startswith("level1 · 0_") and names[1].startswith("level2 · 1_")
    assert fig.layout.height >= 24 * 44 and fig.layout.xaxis.type == "log"
    one = bench_figure.figure(dict(result, rows=rows[:1]))
    assert list(one.data[0].y) == [rows[0]["problem"][:bench_figure.NAME_CHARS - 1] + "…"]


def _x_of_tick(root, label: str) -> float:
    (t,) = [t for t in root.iter(NS + "text") if t.text == label]
    return float(t.get("x"))


def test_the_svg_puts_each_ratio_on_a_log_axis_in_its_problems_row():
    result = kernelbench_like(3)
    result["rows"][1].update(speedup_vs_eager=4.0, speedup_vs_compile=None)   # one missing
    result["rows"][0]["speedup_vs_compile"] = float("inf")                   # and one unplaceable
    result["rows"][2]["problem"] = "2_a<b>&c.py"                             # markup in a name
    root = ET.fromstring(bench_figure.svg(result))   # well-formed despite the name
    assert root.tag == NS + "svg"
    labels = [t.text for t in root.iter(NS + "text") if t.get("text-anchor") == "end"]
    assert labels == bench_figure.labels(result) and labels[2].endswith("2_a<b>&c")
    one, two, four = (_x_of_tick(root, f"{v}x") for v in (1, 2, 4))
    assert abs((four - two) - (two - one)) < 0.2            # log scale: equal steps per doubling
    circles = [c for c in root.iter(NS + "circle") if c.find(NS + "title") is not None]
    diamonds = [p for p in root.iter(NS + "polygon") if p.find(NS + "title") is not None]
    assert len(circles) == 3 and len(diamonds) == 1          # no missing or infinite ratio
    xs = [float(c.get("cx")) for c in circles]
    assert abs(xs[1] - four) < 0.2 and one < xs[0] < two     # 1.5x between 1x and 2x
    ys = [float(c.get("cy")) for c in circles]
    assert ys == sorted(ys) and len(set(ys)) == 3            # one row each, in order
    assert circles[1].find(NS + "title").text == "ours vs eager: 4.00x"
    # the axis reaches the smallest and the largest ratio
    diamond_x = [float(re.match(r"([\d.]+),", p.get("points")).group(1)) for p in diamonds]
    assert min(diamond_x) >= _x_of_tick(root, "0.5x")


def test_a_row_with_no_ratio_says_its_status_and_no_label_runs_off_the_left():
    result = kernelbench_like(3)
    result["rows"][1].update(speedup_vs_eager=None, speedup_vs_compile=None, status="error")
    root = ET.fromstring(bench_figure.svg(result))
    assert [t.text for t in root.iter(NS + "text") if t.get("fill") == "#888"] == ["error"]
    # the longest label at 7.2 px a character (cairosvg's DejaVu Sans Mono at 11 px) still
    # starts inside the picture
    for t in root.iter(NS + "text"):
        if t.get("text-anchor") == "end":
            assert float(t.get("x")) - 7.2 * len(t.text) >= 0, t.text


def test_both_renderings_are_written_beside_each_other(tmp_path):
    written = bench_figure.write(kernelbench_like(2), tmp_path / "results")
    assert sorted(p.name for p in written) == ["results.html", "results.svg"]
    assert "<svg" in (tmp_path / "results.svg").read_text()


def test_a_run_of_several_compile_modes_draws_ours_against_the_fastest_too():
    """Ahead of ``default`` is not ahead of torch.compile where ``max-autotune`` is faster
    (KernelBench's tall-skinny GEMM: 1.08x and 0.83x): with several modes timed, a third
    marker per row; with one, none (it would sit on the diamond)."""
    result = kernelbench_like(2)
    result["rows"][0].update(speedup_vs_compile=1.08, speedup_vs_best_compile=0.83)
    result["rows"][1].update(speedup_vs_compile=0.9, speedup_vs_best_compile=None)

    def triangles(r: dict) -> list:
        root = ET.fromstring(bench_figure.svg(r))
        return [p for p in root.iter(NS + "polygon") if p.find(NS + "title") is not None
                and p.find(NS + "title").text.startswith("ours vs fastest mode")]
    assert triangles(dict(result, modes="default")) == []
    (t,) = triangles(dict(result, modes="default,max-autotune-no-cudagraphs,reduce-overhead"))
    assert t.find(NS + "title").text == "ours vs fastest mode: 0.83x"
    root = ET.fromstring(bench_figure.svg(dict(result, modes="default,reduce-overhead")))
    one = _x_of_tick(root, "1x")
    assert float(t.get("points").split(",")[0]) < one   # left of 1x: behind
    fig = bench_figure.figure(dict(result, modes="default,reduce-overhead"))
    assert [d.name for d in fig.data][-1] == "ours vs fastest mode" and len(fig.data) == 3
    assert len(bench_figure.figure(result).data) == 2
