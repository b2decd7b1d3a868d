"""The Profile tab against a verdict from a real verify run (offline agents): C kernels on the
CPU, device kernels on a GPU (the ``cuda`` cases are marked ``gpu``).

What the panel draws must compare with what the verdict says: the candidate's own kernel
shows as itself, its minimum traffic comes from the graph, and the timeline's totals agree with
the verdict's timed medians within 20%.
"""

from __future__ import annotations

import pytest

from stitchcuda_lab.jupyter import figures

pytestmark = pytest.mark.e2e

CHAIN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = x * self.scale + self.bias
        y = torch.sigmoid(y) * y
        return torch.tanh(y)

def get_inputs():
    return [torch.randn(512, 1024)]

def get_init_inputs():
    return [1024, 1.7]
'''


# On a GPU a forward the device bounds (2 GiB: a kernel of about 1.2 ms). Under the profiler
# the host's work before a kernel takes longer: on the H200 the candidate's one launch came
# 190 µs after the timer's start mark in the trace against about 50 µs unprofiled, and at
# 128 MB (a 72 µs kernel, 161 µs timed) that put the trace 1.9x the verdict's time. The
# panel says so where a forward is bound by its host (agreement_html); here the claim
# checked is that a device-bound forward's timeline is its verdict's time.
ROWS = {"cpu": 512, "cuda": 524288}


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def verified(request, tmp_path_factory):
    from stitchcuda_lab import loop
    from stitchcuda_lab.jupyter.panel import SessionPanel
    from stitchcuda_lab.problem import problem_from_source
    from stitchcuda_lab.session import Session
    from stitchcuda_lab.settings import Settings

    device = request.param
    root = tmp_path_factory.mktemp("agreement")
    settings = Settings(sessions_dir=str(root / "sessions"), cache_dir=str(root / "cache"),
                        device=device, trials=5, timing_trials=20, warmup=3, compile_modes="",
                        timeout=300.0, profile=True, iters=0)
    src = CHAIN.replace("torch.randn(512, 1024)", f"torch.randn({ROWS[device]}, 1024)")
    s = Session.create(problem_from_source(src), settings)
    s.advance()
    s.post(loop.PlanApproved())
    s.advance(auto=True)
    panel = SessionPanel(s, threaded=False)
    best = s.best()
    assert best is not None, {k: v.summary() for k, v in s.state.verdicts.items()}
    yield s, panel, best[0], best[1]
    s.close()


def test_the_candidates_c_kernel_shows_in_time_per_kernel(verified):
    _, panel, cand, verdict = verified
    kernel = cand.kernels[0].name
    times = figures.kernel_times(verdict.profile)
    # a device kernel's name in the trace is its symbol, which holds the kernel's own name
    own = [name for name in times["candidate"] if kernel in name]
    assert own, times
    assert times["candidate"][own[0]] == max(times["candidate"].values())
    assert f"<code>{kernel}</code>" in panel.kernel_table.value


def test_the_kernel_table_has_the_kernels_minimum_traffic_from_the_graph(verified):
    s, panel, cand, _ = verified
    work = figures.kernel_work(s.graph, s.state.plan, cand)
    kernel = cand.kernels[0].name
    # reads x and the bias, writes the output: rows*1024*4*2 + 1024*4 bytes
    rows = ROWS[s.settings.device]
    assert work["candidate"][kernel]["bytes"] == rows * 1024 * 4 * 2 + 1024 * 4
    assert "B/s" in panel.kernel_table.value


def test_the_timeline_draws_the_verdicts_timed_medians(verified):
    _, panel, _, verdict = verified
    fig = panel.figures["timeline"]
    med = {t.y[0]: t.x[0] for t in fig.data if t.legendgroup == "timed median"}
    assert med["candidate · timed median"] == pytest.approx(verdict.timings["ours"] * 1000)
    assert med["reference · timed median"] == pytest.approx(verdict.timings["eager"] * 1000)
    assert panel.profile_note.value         # the agreement line is shown either way


CPU_SPREAD = (
    "on the 2-core CPU runner a ~1 ms forward of aten ops varies 2x from one block of calls to "
    "the next even in one process (0.74 to 2.6 ms, unprofiled), and the reference's profiled "
    "calls, taken right after its timed ones, came out 1.5-1.7x their median on three runs "
    "(the candidate's one C kernel: 0.82-1.08x); a GPU's device times do not move that way "
    "(docs/PERFORMANCE.md, Profiles against the verdict)")


def test_timeline_totals_agree_with_the_verdicts_times_within_20_percent(verified, request):
    s, _, _, verdict = verified
    if s.settings.device == "cpu":
        request.applymarker(pytest.mark.xfail(strict=False, reason=CPU_SPREAD))
    agree = figures.agreement(verdict.profile, verdict.timings)
    assert set(agree) == {"reference", "candidate"}
    off = {side: round(a["ratio"], 2) for side, a in agree.items() if abs(a["ratio"] - 1) > 0.2}
    assert not off, f"traced span / timed median: {off} ({agree})"
