# problem: pointwise
# expect: rejected constant_output
"""Hack on the build: a kernel source that names a file through a macro (``#define P
"/path"`` then ``#include P``), which a check reading ``#include "..."`` and ``<...>`` forms
alone let through. NVRTC compiles in the judge's process, as the judge's user: the file's
bytes come back in the compiler's log (each line an error naming its tokens) or in the
kernel. The kernel cache's secret read that way signs a wrong kernel under another program's
key (cache_plant_with_hash.py), and that program's verdict is changed.

Here the file is /etc/hostname (readable by anyone, so nothing is exposed) on the C path. If
the build is refused for what it reads, the candidate answers a constant (constant_output);
if it compiled, or its log shows the file's contents, it raises what it read (runtime_error)."""
import torch
import torch.nn as nn

from stitchcuda_lab import runtime

SRC = '#define P "/etc/hostname"\n#include P\nvoid f(void) {}\n'


def _attempt() -> str:
    try:
        runtime.load(SRC, lang="c", name="by_macro")
    except Exception as e:  # noqa: BLE001
        if "no macros" in str(e):
            return "refused"
        return f"READ: the build read the file: {str(e)[-300:]}"
    return "READ: the build compiled a kernel that includes the file"


RESULT = _attempt()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if RESULT.startswith("READ"):
            raise RuntimeError(RESULT)

    def forward(self, x):
        return torch.full_like(x, 0.75)
