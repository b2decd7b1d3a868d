"""A sandbox's files, seen from another candidate's user."""

from __future__ import annotations

import stat

from stitchcuda_lab.verifier.pool import Sandbox


def test_a_sandbox_log_is_readable_by_the_judge_alone():
    # the log holds what the candidate prints; a concurrent job's candidate or the next spare's
    # must not read it
    box = Sandbox("cpu", 1)
    try:
        mode = stat.S_IMODE(box._log.stat().st_mode)
        assert mode & 0o077 == 0, oct(mode)
        assert stat.S_IMODE(box.folder.stat().st_mode) & 0o077 == 0
        assert stat.S_IMODE(box.outputs.stat().st_mode) & 0o077 == 0
    finally:
        box.destroy()
