"""stitchcuda_lab/quiet.py: the profiler's log lines never reach the person; errors do."""

import os
import subprocess
import sys
import textwrap

from stitchcuda_lab.quiet import is_noise


def test_the_profilers_lines_are_noise_and_errors_are_not():
    assert is_noise("USDT:2026-12-01 08:20:35 5420:5420 SyncActivityProfilerHandler.cpp:52] "
                    "profiler_start")
    assert is_noise("STAGE:2024-05-01 10:00:00 1:1 ActivityProfilerController.cpp:312] x")
    assert not is_noise("RuntimeError: boom")


def test_lines_written_to_fd_2_inside_the_block_keep_all_but_the_noise():
    code = textwrap.dedent("""
        import os
        from stitchcuda_lab.quiet import quiet_profiler
        with quiet_profiler():
            os.write(2, b"USDT:2026-12-01 08:20:35 1:1 SyncActivityProfilerHandler.cpp:52] "
                        b"profiler_start\\n")
            os.write(2, b"a real warning\\n")
        os.write(2, b"after\\n")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ), check=True)
    assert proc.stderr.splitlines() == ["a real warning", "after"]


def test_the_graphs_eager_profile_prints_no_profiler_lines(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text(textwrap.dedent("""
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x) * 2.0
        def get_inputs():
            return [torch.randn(64, 64)]
        def get_init_inputs():
            return []
    """))
    code = textwrap.dedent(f"""
        from stitchcuda_lab.graph import analyse
        from stitchcuda_lab.problem import load_problem
        analyse(load_problem({str(problem)!r}), device="cpu", profile=True)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert not any(is_noise(line) for line in proc.stderr.splitlines()), proc.stderr
