"""The plotly figures, checked as data: trace types, numeric axes, lanes."""

from __future__ import annotations

from stitchcuda_lab.jupyter import figures

from .fakes import rows


def _profile(**extra):
    return {"reference": rows(1.0), "candidate": rows(0.5), "kernels": {}, "ncu": {}, **extra}


def test_timeline_puts_reference_and_candidate_lanes_on_one_numeric_axis():
    fig = figures.timeline_figure(_profile())
    assert fig.layout.xaxis.type == "linear"
    assert all(t.type == "bar" and t.orientation == "h" for t in fig.data)
    lanes = set(fig.layout.yaxis.categoryarray)
    assert lanes == {"reference · CPU 0", "reference · stream 7",
                     "candidate · CPU 0", "candidate · stream 7"}
    # the reference lanes sit on top: plotly draws the category array bottom-up
    assert list(fig.layout.yaxis.categoryarray)[-1].startswith("reference")


def test_timeline_bars_start_at_their_event_times_relative_to_each_side():
    fig = figures.timeline_figure(_profile())
    bases = [b for t in fig.data for b in t.base]
    assert min(bases) == 0.0                           # each side shifted to start at 0 µs
    assert all(isinstance(b, float) for b in bases)    # numbers, never dates
    relu = [(t.base[i], t.x[i]) for t in fig.data for i, cd in enumerate(t.customdata)
            if cd[0] == "aten::relu" and cd[3] == "reference"]
    assert relu == [(12.0, 8.0)]


def test_timeline_colours_by_category_with_one_legend_entry_each():
    fig = figures.timeline_figure(_profile())
    shown = [t.legendgroup for t in fig.data if t.showlegend]
    assert sorted(shown) == ["cpu_op", "gap", "kernel"]
    names = {t.legendgroup: t.name for t in fig.data}
    assert names["cpu_op"] == "cpu_op: aten op on the host"
    assert names["gap"].startswith("gap: nothing running")


def test_gaps_between_top_level_rows_are_drawn_and_measured():
    rows = [{"lane": "CPU", "name": "a", "start_us": 0, "dur_us": 10, "cat": "cpu_op"},
            {"lane": "CPU", "name": "a.child", "start_us": 2, "dur_us": 3, "cat": "cpu_op"},
            {"lane": "CPU", "name": "b", "start_us": 40, "dur_us": 60, "cat": "cpu_op"}]
    gaps = figures.gaps(rows)
    assert [(g["start_us"], g["dur_us"]) for g in gaps] == [(10, 30)]
    fig = figures.timeline_figure({"reference": rows})
    gap = next(t for t in fig.data if t.legendgroup == "gap")
    assert list(gap.base) == [10] and list(gap.x) == [30]
    assert "30.0 µs" in gap.customdata[0][0]


def _host_only(prof):
    return {k: ([r for r in v if r["cat"] != "kernel"] if isinstance(v, list) else v)
            for k, v in prof.items()}


def test_timed_medians_sit_beside_the_trace_and_agreement_compares_them():
    prof = _host_only(_profile())   # a CPU trace: the reference spans 20 µs, the candidate 10
    timings = {"eager": 0.021, "ours": 0.004}        # ms
    fig = figures.timeline_figure(prof, timings=timings)
    med = [t for t in fig.data if t.legendgroup == "timed median"]
    assert [(list(t.y), list(t.x)) for t in med] == [(["reference · timed median"], [21.0]),
                                                      (["candidate · timed median"], [4.0])]
    agree = figures.agreement(prof, timings)
    assert agree["reference"]["traced_us"] == 20.0 and agree["candidate"]["timed_us"] == 4.0
    assert round(agree["candidate"]["ratio"], 2) == 2.5
    note = figures.agreement_html(prof, timings)
    assert "does not match" in note and "candidate" in note and "+150%" in note
    head, _, why = note.partition("<details>")   # one line; the why folded under it
    assert "+150%" in head and "own process" not in head and "own process" in why
    # a CPU trace: the note names the host's load and the two processes, not launches
    assert "own process" in note and "launch" not in note and "quieter" not in note
    quiet = figures.agreement_html(prof, {"eager": 0.040, "ours": 0.0105})
    assert "-50%" in quiet and "quieter" in quiet and "busier" not in quiet
    ok = figures.agreement_html(prof, {"eager": 0.020, "ours": 0.0105})
    assert "agrees with the verdict's timing within 20%" in ok


def test_with_device_work_in_the_trace_agreement_compares_the_devices_span():
    # a GPU verdict times the device; the host side of a profiled forward carries the
    # profiler's cost, so the 20 µs of host ops around a 4 µs kernel are not the forward's time
    agree = figures.agreement(_profile(), {"eager": 0.004, "ours": 0.0021})
    assert agree["reference"]["traced_us"] == 4.0 and agree["candidate"]["traced_us"] == 2.0
    assert all(abs(a["ratio"] - 1) < 0.1 for a in agree.values())
    note = figures.agreement_html(_profile(), {"eager": 0.002, "ours": 0.0021})
    assert "reference" in note and "launch" in note and "own process" not in note


def _timed_gpu_call(host_us, kernel_us, *, profiler_us=0.0):
    """Rows of a timed call as kineto writes them: the start event's record, the forward's
    host ops (launch overhead, and the profiler's own cost), its kernel, the end record."""
    k0 = 1 + host_us + profiler_us
    return [{"lane": "CPU 0", "name": "cudaEventRecord", "start_us": 0.0, "dur_us": 1.0,
             "cat": "cuda_runtime"},
            {"lane": "CPU 0", "name": "aten::empty", "start_us": 1.0, "dur_us": host_us,
             "cat": "cpu_op"},
            {"lane": "stream 7", "name": "k0_t1", "start_us": k0, "dur_us": kernel_us,
             "cat": "kernel"},
            {"lane": "CPU 0", "name": "cudaDeviceSynchronize", "start_us": k0 - 1,
             "dur_us": kernel_us + 1, "cat": "cuda_runtime"},
            {"lane": "CPU 0", "name": "cudaEventRecord", "start_us": k0 + kernel_us,
             "dur_us": 1.0, "cat": "cuda_runtime"}]


def test_on_a_gpu_agreement_measures_what_the_events_measure_host_gaps_included():
    # a launch-bound forward: 30 µs of host time before a 20 µs kernel; CUDA events around it
    # say 52 µs, and so does the trace from its start mark, where the kernel alone says 20
    prof = {"reference": _timed_gpu_call(10, 100), "candidate": _timed_gpu_call(30, 20)}
    agree = figures.agreement(prof, {"eager": 0.112, "ours": 0.052})
    assert agree["candidate"]["traced_us"] == 52.0 and agree["reference"]["traced_us"] == 112.0
    assert all(abs(a["ratio"] - 1) < 0.01 for a in agree.values())


def test_a_long_trace_keeps_the_timers_marks_when_it_is_cut_to_its_longest_rows():
    from stitchcuda_lab import trace
    events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "ts": 0, "dur": 1,
               "tid": 1}]
    events += [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "ts": 2 + i, "dur": 5,
                "tid": 1} for i in range(50)]
    events += [{"ph": "X", "cat": "kernel", "name": "k", "ts": 60, "dur": 30, "tid": 7,
                "args": {"stream": 7}},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "ts": 95,
                "dur": 1, "tid": 1}]
    rows = trace.timeline({"traceEvents": events}, max_rows=10)
    assert len(rows) == 10
    assert trace.timed_window_us(rows) == 96.0


def test_empty_profile_gives_a_timeline_with_a_note():
    fig = figures.timeline_figure({})
    assert not fig.data
    assert "no profile rows" in fig.layout.annotations[0].text


def test_kernel_times_sum_gpu_rows_per_side():
    times = figures.kernel_times(_profile())
    assert times["reference"] == {"vectorized_elementwise_kernel": 4.0}
    assert times["candidate"] == {"vectorized_elementwise_kernel": 2.0}


def test_kernel_times_use_the_cpu_ops_when_there_are_no_kernels():
    cpu_only = [r for r in rows(1.0) if r["cat"] == "cpu_op"]
    times = figures.kernel_times({"reference": cpu_only, "candidate": cpu_only})
    assert times["reference"] == {"aten::add": 10.0, "aten::relu": 8.0}


def test_kernel_summary_is_used_when_there_are_no_rows():
    prof = {"kernels": {"candidate": [{"name": "fused_0", "total_us": 3.5, "calls": 1}],
                        "reference": {"add_kernel": 5.0}}}
    fig = figures.kernel_figure(prof)
    by_name = {t.name: dict(zip(t.y, t.x)) for t in fig.data}
    assert by_name == {"reference": {"add_kernel": 5.0}, "candidate": {"fused_0": 3.5}}
    assert fig.layout.xaxis.type == "linear"


def test_the_candidates_c_kernel_shows_as_itself_on_the_cpu():
    # what a CPU verify records: the runtime's stitch:: range around the C kernel call
    cand = [{"lane": "CPU 1", "name": "aten::empty", "start_us": 0, "dur_us": 18,
             "cat": "cpu_op"},
            {"lane": "CPU 1", "name": "stitch::k0_t1", "start_us": 219, "dur_us": 900,
             "cat": "user_annotation"}]
    prof = {"candidate": cand, "kernels": [{"name": "aten::empty", "total_us": 18.0}],
            "reference_kernels": []}
    assert figures.kernel_times(prof)["candidate"] == {"k0_t1": 900.0, "aten::empty": 18.0}


def test_kernel_table_shows_achieved_rates_against_the_ceiling():
    prof = {"candidate": [{"lane": "stream 7", "name": "k0_t1", "start_us": 0, "dur_us": 10,
                           "cat": "kernel"}]}
    work = {"candidate": {"k0_t1": {"bytes": 8e6, "flops": 2e6}}}
    table = figures.kernel_table_html(prof, work=work, ceilings={"bytes_per_s": 4.3e12})
    assert "800 GB/s" in table and "200 GFLOP/s" in table and "19% of 4.3 TB/s" in table
    bare = figures.kernel_table_html(prof, work=work)
    assert "not known for this run" in bare and "vs ceiling" not in bare


def test_an_op_called_twice_moves_its_work_in_both_calls_time():
    # two aten::mul nodes: their bytes summed over the forward, over both calls' time
    rows = [{"lane": "CPU 0", "name": "aten::mul", "start_us": t, "dur_us": 400.0,
             "cat": "cpu_op"} for t in (0.0, 500.0)]
    work = {"reference": {"aten::mul": {"bytes": 2.4e6, "flops": 2.4e5}}}
    table = figures.kernel_table_html({"reference": rows}, work=work)
    assert "<td>3 GB/s</td>" in table and "<td>300 MFLOP/s</td>" in table, table


def test_ncu_chart_from_kernel_rows():
    ncu = {"kernels": [{"name": "fused_0",
                        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 81.0,
                        "sm__throughput.avg.pct_of_peak_sustained_elapsed": 22.5,
                        "gpu__time_duration.sum": 3.1}]}
    fig = figures.ncu_figure(ncu)
    assert [t.name for t in fig.data] == ["DRAM % of peak", "SM % of peak"]
    assert list(fig.data[0].x) == [81.0] and list(fig.data[1].x) == [22.5]
    assert figures.ncu_note(ncu) is None


def test_ncu_note_says_why_there_is_no_chart():
    assert figures.ncu_figure({}) is None
    assert "CPU" in figures.ncu_note({}, device="cpu")
    assert "not run" in figures.ncu_note({}, device="cuda")
    assert "ncu not found" in figures.ncu_note({"reason": "ncu not found on PATH"}, "cuda")


def test_history_plots_speedups_per_iteration_on_numeric_axes():
    pts = [{"iteration": 0, "speedup_vs_eager": 1.5, "speedup_vs_compile": None},
           {"iteration": 1, "speedup_vs_eager": 1.75, "speedup_vs_compile": 1.1}]
    fig = figures.history_figure(pts)
    assert fig.layout.xaxis.type == "linear" and fig.layout.yaxis.type == "linear"
    eager = next(t for t in fig.data if t.name == "vs eager")
    assert list(eager.x) == [0, 1] and list(eager.y) == [1.5, 1.75]


def test_history_draws_the_best_so_far_and_marks_edits_and_failures():
    pts = [{"iteration": 0, "speedup_vs_eager": 2.0, "origin": "offline", "status": "pass"},
           {"iteration": 0, "speedup_vs_eager": 2.5, "origin": "user", "status": "pass"},
           {"iteration": 0, "speedup_vs_eager": None, "origin": "user", "status": "build_error"},
           {"iteration": 1, "speedup_vs_eager": 1.2, "origin": "offline", "status": "pass"}]
    fig = figures.history_figure(pts)
    by = {t.name: t for t in fig.data}
    assert list(by["best so far vs eager"].y) == [2.5, 2.5]    # never drops
    assert list(by["vs eager"].marker.symbol) == ["circle", "diamond", "circle"]
    edits = next(t for n, t in by.items() if n.startswith("your edits"))
    assert edits.marker.symbol == "diamond-open"   # the diamonds, named in the legend, open:
    assert "each series' colour" in edits.name     # a point's diamond takes its series' colour
    assert list(by["failed (on the axis)"].x) == [0] and list(by["failed (on the axis)"].y) == [0.0]


def test_history_shows_each_failure_of_an_iteration_apart():
    pts = [{"iteration": 2, "status": "incorrect", "candidate_id": f"c{i}"} for i in range(3)]
    pts.append({"iteration": 1, "status": "build_error", "candidate_id": "c9"})
    failed = next(t for t in figures.history_figure(pts).data if t.name.startswith("failed"))
    xs = list(failed.x)
    assert len(set(xs)) == 4 and xs[3] == 1
    assert all(1.5 < x < 2.5 for x in xs[:3]) and abs(sum(xs[:3]) / 3 - 2) < 1e-9
    assert [c[0] for c in failed.customdata] == [2, 2, 2, 1]   # the hover says the iteration
    assert not any(t.name.startswith("your edits") for t in figures.history_figure(pts).data)


def test_nested_ops_draw_thinner_inside_their_parent():
    prof = {"reference": [
        {"lane": "CPU", "name": "aten::linear", "start_us": 0, "dur_us": 10, "cat": "cpu_op"},
        {"lane": "CPU", "name": "aten::addmm", "start_us": 1, "dur_us": 8, "cat": "cpu_op"},
        {"lane": "CPU", "name": "aten::relu", "start_us": 11, "dur_us": 2, "cat": "cpu_op"}]}
    bar = figures.timeline_figure(prof).data[0]
    width = {cd[0]: w for cd, w in zip(bar.customdata, bar.width)}
    assert width["aten::addmm"] < width["aten::linear"] == width["aten::relu"]


def test_verifier_kernel_summaries_per_side():
    prof = {"kernels": [{"name": "fused_0", "count": 1, "total_us": 5.0, "share": 1.0}],
            "reference_kernels": [{"name": "aten::add", "count": 1, "total_us": 27.0},
                                  {"name": "aten::relu", "count": 1, "total_us": 6.0}]}
    assert figures.kernel_times(prof) == {"candidate": {"fused_0": 5.0},
                                          "reference": {"aten::add": 27.0, "aten::relu": 6.0}}


def test_ncu_note_uses_the_verifiers_reason():
    note = figures.ncu_note({"available": False, "reason": "disabled (set STITCH_NCU=1)"}, "cuda")
    assert "disabled (set STITCH_NCU=1)" in note


def test_history_of_one_iteration_draws_its_best_and_failures_whole():
    pts = [{"iteration": 0, "speedup_vs_eager": 1.3, "origin": "offline", "status": "pass"},
           {"iteration": 0, "speedup_vs_eager": None, "origin": "user", "status": "incorrect"}]
    by = {t.name: t for t in figures.history_figure(pts).data}
    best = by["best so far vs eager"]
    assert len(best.x) == 2 and best.x[0] < 0 < best.x[1] and list(best.y) == [1.3, 1.3]
    assert by["failed (on the axis)"].cliponaxis is False     # the x on the axis line is not cut in half


def test_a_timed_calls_rows_begin_at_its_start_mark_without_the_profilers_warm_up():
    from stitchcuda_lab.verifier import profile
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::fill_", "ts": 0, "dur": 300, "tid": 1},
              {"ph": "X", "cat": "kernel", "name": "fill", "ts": 310, "dur": 2, "tid": 7},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "ts": 1000,
               "dur": 1, "tid": 1},
              {"ph": "X", "cat": "kernel", "name": "k", "ts": 1010, "dur": 30, "tid": 7},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "ts": 1045,
               "dur": 1, "tid": 1}]
    rows = profile.rows({"traceEvents": events})
    assert [(r["name"], r["start_us"]) for r in rows] == [
        ("cudaEventRecord", 0.0), ("k", 10.0), ("cudaEventRecord", 45.0)]
    # a checked call's trace has no timer: every row stays
    assert len(profile.rows({"traceEvents": events[:2] + events[3:4]})) == 3


def test_samples_from_outside_show_each_kind_of_code_with_its_share():
    prof = {"samples": {"stops": 24, "samples": 20,
                        "kinds": {"own": 14, "python": 5, "torch_copy": 1},
                        "labels": {"own": "the candidate's own code", "python": "the interpreter",
                                   "torch_copy": "PyTorch's copies and fills"},
                        "where": {"own": {"lib_k.so": 14}, "python": {"libpython3.11.so": 5}}}}
    out = figures.samples_html(prof)
    assert "20 samples at 24 moments" in out
    rows = out.split("<tr>")[2:]   # after the head: most samples first
    assert "the candidate&#x27;s own code" in rows[0] and "70%" in rows[0]
    assert "lib_k.so" in rows[0] and "the interpreter" in rows[1] and "25%" in rows[1]
    assert figures.samples_html({}) == "" and figures.samples_html(
        {"samples": {"kinds": {}}}) == ""


def test_history_ranks_a_speedup_timed_under_a_moving_load_below_the_steady_ones():
    """The session's best is the fastest steady verdict (loop._best): a 2.14x timed while the
    host's load moved is drawn open and does not lift the best-so-far line once a steady
    verdict is in."""
    pts = [{"iteration": 0, "speedup_vs_eager": 2.14, "origin": "offline", "status": "pass",
            "steady": False},
           {"iteration": 0, "speedup_vs_eager": 0.87, "origin": "user", "status": "pass"},
           {"iteration": 1, "speedup_vs_eager": 3.0, "origin": "offline", "status": "pass",
            "steady": False},
           {"iteration": 2, "speedup_vs_eager": 1.1, "origin": "offline", "status": "pass"}]
    by = {t.name: t for t in figures.history_figure(pts).data}
    assert list(by["best so far vs eager"].y) == [0.87, 0.87, 1.1]
    assert list(by["vs eager"].marker.symbol) == ["circle-open", "diamond", "circle-open",
                                                  "circle"]
    alone = [dict(pts[0])]   # nothing steady yet: the unsteady one is the best there is
    assert max(figures.history_figure(alone).data[1].y) == 2.14
