"""The CUDA kernels' online softmax (``codegen.update``, ``group_update`` and the prelude's
``sc_sm_comb``): its steps are plain C, so they run here, compiled by the C compiler, on rows
with NaN and infinities, against what ATen's softmax and logsumexp give. The same text is what
the GPU kernels contain."""

from __future__ import annotations

import math
import re
import subprocess

import pytest
import torch

from stitchcuda_lab.agents.offline.backend_cuda import REDUCE_PRELUDE
from stitchcuda_lab.agents.offline.codegen import group_update, update
from stitchcuda_lab.runtime.build import c_compiler

NAN, INF = math.nan, math.inf
ROWS = [
    [1.0, 2.0, 3.0, -1.0, 0.5, 4.0, -2.0, 0.0],
    [NAN, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],            # NaN before any number
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, NAN],            # NaN last
    [NAN] * 8,
    [-INF] * 8,
    [-INF, -INF, 1.0, -INF, 2.0, -INF, -INF, -INF],      # masked, as an attention mask
    [-INF, NAN, -INF, -INF, -INF, -INF, -INF, -INF],
    [-INF, -INF, -INF, -INF, 3.0, 1.0, -INF, 2.0],       # a first group of -inf alone
    [1.0, INF, 2.0, -INF, 0.0, 3.0, -1.0, 4.0],          # +inf: logsumexp +inf, softmax NaN
    [INF, 1.0, 2.0, 3.0, 4.0, INF, 6.0, 7.0],            # two of them, in two groups
    [1.0, 2.0, INF, 3.0, INF, 5.0, 6.0, 7.0],            # two in one group, after numbers
    [INF] * 8,
    [INF, 1.0, 2.0, NAN, 4.0, 5.0, 6.0, 7.0],            # +inf and NaN: NaN
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, NAN, INF],
]


def _combine_expr() -> str:
    """sc_sm_comb's sum, from the prelude the GPU kernels include, for T = float."""
    line = re.search(r"const T s = (.*);", REDUCE_PRELUDE.split("struct sc_sm_comb", 1)[1])
    assert line, "sc_sm_comb's sum is not where this test reads it"
    return line.group(1).replace("T(0)", "0.0f")


def _harness(rows: list[list[float]]) -> str:
    """A C program printing (m, s) per row three ways: element by element, four at a time
    (``group_update``), and as two halves merged (``sc_sm_comb``)."""
    def lit(v: float) -> str:
        return "NAN" if v != v else ("INFINITY" if v == INF else "-INFINITY" if v == -INF
                                     else repr(v) + "f")
    data = ",\n".join("{" + ", ".join(lit(v) for v in r) + "}" for r in rows)
    elem = update("softmax", "st", "x[j]", "j", "float")
    group = group_update("softmax", "st", ["x[j]", "x[j + 1]", "x[j + 2]", "x[j + 3]"], "float")
    half = update("softmax", "h[k]", "x[j]", "j", "float")
    return f"""
#include <math.h>
#include <stdio.h>
#define SC_INF INFINITY
typedef struct {{ float m, s; }} sm;
static float sc_exp(float x) {{ return expf(x); }}
static float sc_max(float a, float b) {{ return fmaxf(a, b); }}
static const float rows[{len(rows)}][8] = {{{data}}};
int main(void) {{
    for (int r = 0; r < {len(rows)}; ++r) {{
        const float* x = rows[r];
        sm st = {{-SC_INF, 0.0f}};
        for (int j = 0; j < 8; ++j) {{ {elem} }}
        printf("%g %g ", st.m, st.s);
        st.m = -SC_INF; st.s = 0.0f;
        for (int j = 0; j < 8; j += 4) {group}
        printf("%g %g ", st.m, st.s);
        sm h[2] = {{{{-SC_INF, 0.0f}}, {{-SC_INF, 0.0f}}}};
        for (int k = 0; k < 2; ++k) for (int j = 4 * k; j < 4 * k + 4; ++j) {{ {half} }}
        sm a = h[0], b = h[1];
        const float m = a.m > b.m ? a.m : b.m;
        const float s = {_combine_expr()};
        printf("%g %g\\n", m, s);
    }}
    return 0;
}}
"""


def test_the_online_softmax_keeps_atens_nans_and_infinities(tmp_path):
    src, exe = tmp_path / "sm.c", tmp_path / "sm"
    src.write_text(_harness(ROWS))
    built = subprocess.run([c_compiler(), "-O1", "-o", str(exe), str(src), "-lm"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        pytest.fail(f"the softmax steps do not compile as C:\n{built.stderr}")
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    for row, line in zip(ROWS, out.splitlines()):
        x = torch.tensor(row)
        want_lse, want_sm = torch.logsumexp(x, 0), torch.softmax(x, 0)
        vals = [float(v) for v in line.split()]
        for way, (m, s) in zip(("element", "group", "halves"), zip(vals[::2], vals[1::2])):
            # as expand._softmax reads the state: log(0) = -inf, log(NaN) = NaN, and a row
            # whose max is +inf is NaN to the softmaxes
            lse = m + torch.log(torch.tensor(s))
            sm = torch.exp(x - m) / s if m != INF else torch.full_like(x, NAN)
            assert torch.allclose(lse, want_lse, equal_nan=True), (way, row, m, s)
            assert torch.allclose(sm, want_sm, equal_nan=True), (way, row, m, s)
