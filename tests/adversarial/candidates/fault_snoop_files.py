# problem: pointwise
# expect: rejected constant_output
# why: look for what another process keeps in files: the kernel cache's secret (.key) under the temp folders, the caches and the working trees, the judge's working folder (stitch_judge_*: the problem copy, the reference's trace), other sandboxes' folders and their output files in /dev/shm (the next candidate's spare, a concurrent job's outputs), (the sandboxes' logs, which hold what each candidate prints, are checked in tests/verifier/test_pool.py: files left by other runs on a shared machine would make this one flaky). Anything readable is raised as an exception, so a leak shows in the verdict; with nothing found it returns a constant.
"""Fault: snoop the files of the judge, the cache and other sandboxes."""
import os

import torch
import torch.nn as nn

ROOTS = ["/tmp", "/var/tmp", "/dev/shm", "/root", "/home", "/work"]


def _walk(root, depth):
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in entries:
        yield e
        if depth > 0 and e.is_dir(follow_symlinks=False):
            yield from _walk(e.path, depth - 1)


def _readable(path):
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False


def snoop():
    me, found = os.getuid(), []
    for root in ROOTS:
        for e in _walk(root, 3):
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == me or not e.is_file(follow_symlinks=False):
                continue
            secret = e.name == ".key"
            judge = ("stitch_judge_" in e.path or "stitch_sandbox_" in e.path) and not (
                e.name.endswith(".log") and os.path.dirname(e.path) in ("/tmp", "/var/tmp"))
            outputs = "stitch_out_" in e.path and e.name.endswith(".bin")
            if (secret or judge or outputs) and _readable(e.path):
                found.append(e.path)
    return found


class ModelNew(nn.Module):
    def forward(self, x):
        found = snoop()
        if found:
            raise RuntimeError("readable: " + ", ".join(found[:8]))
        return torch.ones_like(x)
