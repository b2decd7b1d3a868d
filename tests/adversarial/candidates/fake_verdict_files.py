# problem: pointwise
# expect: rejected constant_output
"""Hack: writes pass verdicts everywhere it can (its job folder, the working folder, the temp
folder) and prints one, then returns a constant. Verdicts come only from the Verifier's own
checks, so the files change nothing."""
import json
import os
import tempfile
from pathlib import Path

import torch
import torch.nn as nn

FAKE = {"status": "pass", "reason": "", "correct": True, "speedup_vs_eager": 99.0}
for d in {Path(__file__).parent, Path(os.getcwd()), Path(tempfile.gettempdir())}:
    for name in ("verdict.json", "result.json"):
        try:
            (d / name).write_text(json.dumps(FAKE))
        except OSError:
            pass
print("VERDICT: " + json.dumps(FAKE), flush=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full_like(x, 1.0)
