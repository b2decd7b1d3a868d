# problem: cancellation
# expect: rejected output_aliasing
"""Hack (aliasing judged by virtual addresses; inputs that arrive as files): (x + 4096) - 4096 is
x in exact arithmetic, and x itself passes (judged against the float64 result, as
pass_cancellation_exact.py does with a copy). This forward copies nothing: it finds the file its
input was handed over in (the harness's ``cmd["inputs"]`` paths, one frame walk away) and maps
that file a second time, MAP_PRIVATE, returning a tensor over the new mapping. The output holds
x's bytes without one byte moved: the page-cache pages the judge wrote are mapped in by the
kernel, and read by the judge (process_vm_readv, after its clock stopped) where they lie.

The sandbox's aliasing check compares address ranges only: the two mappings of one file are
two ranges, so neither ``output_aliasing`` (an output sharing memory with an input) nor
``cached_output`` sees it, and MAP_PRIVATE keeps it a copy in meaning (a write to either copies
that page). No caller of the kernel gets this: its inputs are tensors in memory, not files, and
the work saved (a pass writing the output) is exactly what every honest program pays. Where no
file is found (inputs drawn in the sandbox), it falls back to a copy.

It passed at 4-33x eager; the judge now reads the frozen process's memory map after each
timed call and refuses an output that lies in a mapping of a file (exchange.in_file_mapping).
"""
import mmap
import os
import sys

import torch
import torch.nn as nn


def _handed_files():
    f = sys._getframe(1)
    while f is not None:
        cmd = f.f_locals.get("cmd")
        if isinstance(cmd, dict) and isinstance(cmd.get("inputs"), list):
            return cmd["inputs"]
        f = f.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        entries = _handed_files()
        e = entries[0] if entries else None
        if not (isinstance(e, dict) and "path" in e and e.get("dtype") == "float32"
                and list(e.get("shape", [])) == list(x.shape)):
            return x.clone()
        n = x.numel() * 4
        fd = os.open(e["path"], os.O_RDONLY)
        try:
            m = mmap.mmap(fd, n, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        return torch.frombuffer(m, dtype=torch.float32).reshape(x.shape)
