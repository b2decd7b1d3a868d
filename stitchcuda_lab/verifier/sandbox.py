"""The candidate's process: one candidate, then discarded. Nothing in it is trusted.

Started ahead as a spare (``python -m stitchcuda_lab.verifier.sandbox DEVICE RFD WFD``): torch
imported, the CUDA context up, nothing of a candidate loaded. When the judge hands it a job it
takes the unprivileged user the judge named (when started as root), caps its resources,
routes kernel builds to the judge, loads the problem (for ``get_inputs``) and the candidate,
builds the reference ``Model`` (the judge times this process's call path on it before any
candidate code is here: ``call`` below), then on ``candidate`` the candidate's ``ModelNew``, and
serves the judge's commands:

- ``trial``: take the inputs the judge drew and handed over (``exchange.take_over``; where
  they cannot travel that way, draw them from the command's seed, scaled as it says for the
  trial outside get_inputs()'s range: ``exchange.widen``), call the model once (under
  the op tracer, and the profiler when asked), run the checks only this process can make
  (aliasing, mutated inputs, tensor subclasses, threads and streams left running, precision
  switches, a second call for determinism), write the outputs for the judge;
- ``call``: map the inputs the judge handed over (CPU: ``exchange.map_inputs``, no pass over
  their bytes) or draw them from the command's seed, then time one call on them
  (timing.Timer); say where the outputs lie for the judge to read them out of this process
  as the call answers (CPU; where it cannot, write them to files it pins) or keep them (CUDA)
  until the judge names, after the fact, the one it checks (``outputs``).

What this process reports is evidence, not a verdict: the judge compares the outputs itself,
bounds the timings with its own clock and reads the trace itself (verify.py). A candidate that
rewrites this harness can only make its own verdict worse or get caught by those bounds.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import sys
import time
import traceback
import types
import warnings
from pathlib import Path
from typing import Any

from . import channel
from .antihack import (Held, any_overlap, live_threads, new_threads, signal_handlers,
                       work_after_timer)
from .compare import same
from .exchange import (draw, let_go_if_large, map_inputs, reseed, take_over, tensors, widen,
                       write_outputs)
from .profile import trace_to_file


class Refused(Exception):
    """A check of this process failed: the candidate is rejected under ``name``."""

    def __init__(self, name: str, detail: str):
        super().__init__(f"{name}: {detail}")
        self.name, self.detail = name, detail


# Outputs of earlier calls kept alive for the aliasing check (``antihack.Held``), newest first;
# older ones are held weakly. On a GPU this is memory the judge and the candidate share: 8 GiB
# kept five outputs of 1.6 GB alive through a job. A call's own two outputs, and a timed
# call's with the last's, are compared while both are alive whatever this budget.
HELD_BYTES = {"cuda": 1 << 30, "cpu": 2 << 30}


# Why a pool is refused too: a worker that finishes a call's outputs a moment after the call
# answers cannot be told from one that waited, by the outputs alone (the judge reads them after
# the reply, and a pointwise pass over a small tensor takes microseconds).
THREADS_HINT = (" (a forward may start threads but must join them before it returns: a thread "
                "pool's workers count too; parallelise inside the kernel, with OpenMP in C or "
                "the GPU's blocks, instead)")


class Harness:
    def __init__(self, device: str, rfd: int, wfd: int):
        self.device, self.rfd, self.wfd = device, rfd, wfd
        self.job: dict = {}
        self.folder = Path(".")
        self.out_dir = Path(".")
        self.init: list = []
        self.prob: Any = None
        self.model: Any = None
        # every output returned so far (aliasing across calls), the newest kept alive
        self.held = Held(HELD_BYTES["cuda" if str(device).startswith("cuda") else "cpu"])
        self.kept_outputs: list = []  # the last round's outputs, until the judge picks some
        self.kept_inputs: list = []   # ... and the inputs each call left behind it
        self.last_call: list = []     # the last timed call's outputs themselves
        # CPU: the outputs of the call before it, let go in ``prepare`` (Harness.call)
        self.letting_go: list = []
        self.arena: Any = None        # CUDA: the arena the judge maps (arena.py), once in use
        self.arena_made: Any = None   # ... made, until the judge says it can use it
        self.slot = 0                 # CPU: the timed call's place in its round (its files)
        self.sizes: list = []         # CPU: the bytes of the last timed call's outputs
        self.flags: dict = {}
        self.threads: set = set()
        self.tracer: Any = None
        self.timer: Any = None

    # -- the judge's channel --
    def ask(self, msg: dict) -> dict:
        channel.send(self.wfd, msg)
        reply = channel.recv(self.rfd)
        if reply is None:
            os._exit(0)
        return reply

    def build(self, lang: str, source: str, name: str, flags: tuple, arch: str) -> str:
        from ..errors import BuildError
        reply = self.ask({"op": "build", "lang": lang, "source": source, "name": name,
                          "flags": list(flags), "arch": arch})
        if "error" in reply:
            raise BuildError(reply["error"], log=reply.get("log", ""), hint=reply.get("hint"))
        return reply["path"]

    # -- the job --
    def load_problem(self, job: dict) -> dict:
        """The problem and its reference model, before any candidate code: the judge times
        this process's own call path on it, so its clock knows what the path costs here."""
        import torch

        from .. import runtime
        from .exchange import seed_all
        from .timing import Timer
        self.job = job
        self.folder = Path(job["folder"])
        self.out_dir = Path(job.get("outputs") or job["folder"])
        torch.set_num_threads(int(job["threads"]))
        runtime.kernels.use_builder(self.build)
        self.prob = _load_module(self.folder / "problem.py", "stitch_problem")
        # what the harness uses is bound now, before any candidate code: replacing the
        # problem's get_inputs or a harness function later changes nothing here
        self.draw = _bound_draw(self.prob.get_inputs)
        seed_all(job["weight_seed"])
        self.init = list(self.prob.get_init_inputs())
        seed_all(job["weight_seed"])
        with torch.no_grad():
            self.model = self.prob.Model(*self.init).to(self.device)
        self.timer = Timer(self.device, drop_hooks=True)
        from .antihack import make_tracer
        self.threads = live_threads()     # before the candidate's __init__ runs
        self.signals = signal_handlers()
        self.tracer = make_tracer()
        # bytes the judge reads out of this process to learn whether it can read a timed
        # call's outputs the same way (exchange.can_peek), made before any candidate code
        self.probe = torch.frombuffer(bytearray(os.urandom(64)), dtype=torch.uint8)
        return {"problem_loaded": True,
                "probe": {"addr": self.probe.data_ptr(), "bytes": bytes(self.probe.numpy()).hex()}}

    def load_candidate(self, cmd: dict) -> dict:
        import torch

        from . import antihack
        from .exchange import seed_all
        self.model = None
        self.kept_outputs = []
        t0 = time.perf_counter()
        flags_problem = antihack.numerics_flags()
        cand = _load_module(self.folder / "candidate.py", "stitch_candidate")
        if not hasattr(cand, "ModelNew"):
            from .failures import Plain
            raise Plain("exception", "the candidate defines no ModelNew class")
        seed_all(self.job["weight_seed"])
        with torch.no_grad():
            self.model = cand.ModelNew(*self.init).to(self.device)
        self.sync()
        self.flags = flags_problem
        self.check_flags()
        return {"loaded": True, "build_ms": (time.perf_counter() - t0) * 1e3,
                "kept_ops": [str(k) for k in getattr(cand, "KEPT_OPS", [])]}

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch
            torch.cuda.synchronize()

    def check_flags(self) -> None:
        from . import antihack, timing
        changed = antihack.changed_numerics(self.flags)
        if changed:
            raise Refused("numerics_flags", "; ".join(changed[:3]))
        bad = timing.tampered()
        if bad:
            raise Refused("patched_timer", "replaced " + ", ".join(bad[:6]))

    def trial(self, cmd: dict) -> dict:
        """One checked call on the inputs the judge handed over, or drawn here from the
        command's seed (scaled as it says) where they could not travel that way."""
        import torch
        # the timed calls' last outputs are theirs to keep (the next timed call must not reuse
        # them, and ``held`` has the checked ones'); what the allocator kept of those calls
        # goes back before this call draws
        self.last_call, self.letting_go = [], []
        gc.enable()
        split: dict[str, float] = {}
        clock = time.perf_counter()

        def spent(part: str) -> None:   # where this trial's time went, for the verdict's phases
            nonlocal clock
            now = time.perf_counter()
            split[part] = split.get(part, 0.0) + (now - clock) * 1e3
            clock = now
        let_go_if_large(sum(n for n in cmd.get("sizes", []) if isinstance(n, int)), self.device)
        spent("release")   # a full collection of this process's objects, where it runs
        handed = cmd.get("inputs")
        inputs = self.draw_trial(cmd) if handed is None else [
            x.to(self.device) if isinstance(x, torch.Tensor) else x for x in take_over(handed)]
        # on a GPU, inputs it drew are drawn again after the call rather than copied: no copy
        # of GBs held through it (on the host a copy costs less than a draw)
        saved = None if handed is None and self.device.startswith("cuda") else [
            x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        spent("inputs")
        poison(self.device, cmd.get("sizes", []))
        reseed(cmd)
        spent("poison")
        trace_path = None
        with torch.no_grad(), nan_filled_empty():
            if cmd.get("trace"):
                trace_path = str(self.folder / f"trace_{cmd['tag']}.json")
                with self.tracer:
                    out = trace_to_file(lambda: tensors(self.model(*inputs)), self.device,
                                        trace_path)
            else:
                with self.tracer:
                    out = tensors(self.model(*inputs))
        out = _plain(out)
        if self.device.startswith("cuda"):
            torch.cuda.current_stream().synchronize()
        spent("traced_call" if trace_path else "call")
        snap = [o.detach().clone() for o in out]
        self.check_flags()
        started = new_threads(self.threads)
        if started:
            raise Refused("background_thread", "threads still running after the call: "
                          + ", ".join(started[:4]) + THREADS_HINT)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()    # now every stream has finished
            if any(not same(o, s) for o, s in zip(out, snap)):
                raise Refused("side_stream", "outputs changed after the current stream was "
                              "synchronised (work left on another stream)")
        else:
            time.sleep(0.05 if cmd.get("first") else 0.005)
            if any(not same(o, s) for o, s in zip(out, snap)):
                raise Refused("background_thread", "outputs changed after the call returned")
        if any_overlap(out, [x for x in inputs if isinstance(x, torch.Tensor)]):
            raise Refused("output_aliasing", "an output shares memory with an input")
        if self.held.overlaps(*out):
            raise Refused("cached_output", "an output reuses the memory of an earlier call's "
                          "output")
        # sent as soon as checked, and each copy let go once it is needed no more: inputs of
        # GBs were held five times over in this process
        spent("checks")
        (entries,) = self.send([snap], f"t{cmd['tag']}")
        del snap
        spent("send")
        saved = self.draw_trial(cmd) if saved is None else saved
        if any(isinstance(a, torch.Tensor) and not same(a, b) for a, b in zip(inputs, saved)):
            raise Refused("input_mutation", "the forward changed its inputs")
        inputs = []   # let go (not del: the traced call's closure holds the name)
        spent("inputs")
        # determinism: a second call on the same inputs
        reseed(cmd)
        with torch.no_grad(), self.tracer, nan_filled_empty():
            out2 = tensors(self.model(*saved))
        out2 = _plain(out2)
        self.sync()
        if any_overlap(out2, out):
            raise Refused("cached_output", "a second call returned the first call's memory")
        self.held.add(out + out2)
        spent("second")
        second = (self.send([[o.detach() for o in out2]], f"t{cmd['tag']}b", after=True)[0]
                  if cmd.get("second", True) else None)
        spent("send")
        ops = dict(self.tracer.counts)
        self.tracer.counts.clear()
        # before the judge copies the outputs out, beside what this process holds
        nbytes = sum(t.numel() * t.element_size() for t in [*saved, *out, *out2]
                     if isinstance(t, torch.Tensor))
        del saved, out, out2
        let_go_if_large(nbytes, self.device)
        spent("release")
        return {"outputs": entries, "second": second, "trace": trace_path, "aten_ops": ops,
                "split": split}

    def draw_trial(self, cmd: dict) -> list:
        """A checked call's inputs from the command's seed, scaled as it says."""
        seed = int(cmd["seed"])
        return widen(self.draw(self.device, seed), cmd.get("widen"), seed)

    def send(self, groups: list[list], tag: str, after: bool = False) -> list[list[dict]]:
        """A checked call's outputs (or its second call's, ``after`` the first's), for the
        judge to read as the call answers: on CUDA in the arena where they fit, which the
        judge copies out device to device (outputs of GBs took seconds each through host
        memory and a file), the rest as files."""
        if self.arena is None:
            return [write_outputs(g, self.out_dir, f"{tag}g{i}") for i, g in enumerate(groups)]
        import torch
        placed = self.arena.put(groups, after=after)
        if any(t.is_cuda for g in groups for t in g):   # landed before the judge reads them
            torch.cuda.current_stream().synchronize()
        return [[write_outputs([t], self.out_dir, f"{tag}g{i}o{j}")[0] if "error" in e else e
                 for j, (e, t) in enumerate(zip(es, g))]
                for i, (es, g) in enumerate(zip(placed, groups))]

    def call(self, cmd: dict) -> dict:
        """One timed call on inputs drawn from the command's seed (the draw is not timed).

        Before the reply the outputs are checked plain and copied (on the CPU into a file whose
        bytes the judge takes before its clock stops), and no thread may still run: work
        deferred past the timer then lands inside the judge's clock, or is caught.

        On the CPU nothing of the candidate's may run between its timer and the reply, where
        the judge's clock allows milliseconds for the path: the collector of reference cycles
        is off for the call (a cycle's finalizer would run wherever the harness allocates),
        and the outputs of the call before go in ``prepare``, outside the judge's clock (a
        ``weakref.finalize`` on an output, run as the harness let it go, filled the next
        call's output after its timer: candidates/finalizer_fills_after_timer.py)."""
        import torch
        cpu = not self.device.startswith("cuda")
        if cpu:
            gc.disable()
        handed = cmd.get("inputs")
        peek = bool(cmd.get("peek"))
        xs = (self.draw(self.device, int(cmd["seed"])) if handed is None
              else map_inputs(handed) if peek else take_over(handed))
        reseed(cmd)
        trace_path = None
        with torch.no_grad():
            if cmd.get("trace"):   # the profile a person reads: a timed call, under the profiler
                trace_path = str(self.folder / f"trace_{cmd['tag']}.json")
                if self.timer.cuda:
                    self.timer.flush()
                ms, wall, out = trace_to_file(lambda: self.timer.call(
                    lambda: tensors(self.model(*xs)), flush=False), self.device, trace_path,
                    warm=True)
            else:
                def forward():
                    return tensors(self.model(*xs))
                # kept past the reply: a finalizer on it (reached through the frames) would
                # run as the timer let it go, after its end reading
                if cpu:
                    self.letting_go.append(forward)
                ms, wall, out = self.timer.call(forward)
        moved = work_after_timer(self.signals)
        if moved:
            raise Refused("patched_timer", moved)
        if cpu and gc.isenabled():
            raise Refused("patched_verifier", "the garbage collector was switched on during a "
                          "timed call: a reference cycle's finalizer would then run after the "
                          "candidate's timer")
        out = _plain(out)
        started = new_threads(self.threads)
        if started:
            raise Refused("background_thread", "threads still running after a timed call: "
                          + ", ".join(started[:4]) + THREADS_HINT)
        # the memory checks of a checked call, here too: a timed call is told apart from a
        # checked one easily (deterministic mode), so it must not be where memory is reused
        if any_overlap(out, [x for x in xs if isinstance(x, torch.Tensor)]):
            raise Refused("output_aliasing", "a timed call's output shares memory with its "
                          "input")
        if any_overlap(out, self.last_call) or self.held.overlaps(*out):
            raise Refused("cached_output", "a timed call's output reuses the memory of an "
                          "earlier call's output")
        # the copy first, then the previous call's outputs go: the next call's outputs get
        # their memory back (as a caller that drops its results would), not fresh pages whose
        # first touch (page faults) the candidate's timer would count
        entries = None
        kept = list(out)   # alive until the next call, so its memory is not reused
        placed = None
        if self.arena is not None:   # into the judge's memory, which takes them at the reply
            placed = self.arena.put([out, [x for x in xs if isinstance(x, torch.Tensor)]])
        elif self.device.startswith("cuda"):
            self.kept_outputs.append([o.detach().clone() for o in out])
        elif peek:   # read by the judge out of this process before its clock stops
            flat = [o.detach().contiguous() for o in out]
            kept += flat
            entries = [{"addr": f.data_ptr(), "shape": list(o.shape),
                        "dtype": str(o.dtype).replace("torch.", "")} for f, o in zip(flat, out)]
        else:   # pinned by the judge before its clock stops (exchange.pin_output); a round's
            # files are written over by the next round's calls, in place
            entries = write_outputs(out, self.out_dir, f"c{self.slot}", reuse=True)
            self.sizes = [e["nbytes"] for e in entries]
            self.slot += 1
        if cpu:
            self.letting_go.append(self.last_call)
        self.last_call = kept
        # as the call left them: the judge compares a picked call's with its own draw
        if placed is None:
            self.kept_inputs.append([x for x in xs if isinstance(x, torch.Tensor)])
        if self.device.startswith("cuda"):
            torch.cuda.current_stream().synchronize()   # the arena's copies done too
        return {"ms": ms, "wall_ms": wall, "trace": trace_path, "outputs": entries,
                "arena": placed}

    def map_arena(self, cmd: dict) -> dict:
        """The arena (arena.py): made before any candidate code is loaded, its descriptor sent
        to the judge's socket, the judge's token written into it so that the judge can see
        its mapping work. Used only once the judge says so (``use_arena``); where it cannot
        be made, the judge keeps the older way and says so in the verdict."""
        import torch

        from .arena import Arena, send_fd
        try:
            token = bytes.fromhex(str(cmd.get("token")))
            self.arena_made = Arena(int(cmd.get("nbytes", 0)), self.device)
            send_fd(str(cmd.get("socket")), self.arena_made.fd)
            probe = torch.frombuffer(bytearray(token), dtype=torch.uint8).to(self.device)
            (entries,) = self.arena_made.put([[probe]])
            torch.cuda.current_stream().synchronize()
        except Exception as e:  # noqa: BLE001  (ArenaError, or a driver without VMM export)
            self.drop_arena()
            return {"mapped": False, "why": f"{type(e).__name__}: {e}"}
        return {"mapped": True, "nbytes": self.arena_made.nbytes, "probe": entries}

    def use_arena(self, cmd: dict) -> dict:
        if cmd.get("use") and self.arena_made is not None:
            self.arena = self.arena_made
        else:
            self.drop_arena()
        return {"arena": self.arena is not None}

    def drop_arena(self) -> None:
        if self.arena_made is not None:
            self.arena_made.close()
        self.arena_made = self.arena = None

    def prepare(self, cmd: dict) -> dict:
        """Before a timed call on the CPU, outside the judge's clock: the files the call will
        write its outputs to made as large as the last call's outputs (tmpfs pages take
        milliseconds to allocate for tens of MB; written over, they cost a copy, as the copy
        the sandbox kept of a call's outputs before did). The cache is flushed next, by the
        judge from its own process: a flush in this one was the candidate's to skip. The
        outputs of the call before the last go here, and the collector is on again until the
        call (``call``)."""
        self.letting_go = []
        gc.enable()
        for i, n in enumerate(self.sizes):
            path = self.out_dir / f"c{self.slot}_{i}.bin"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                if os.fstat(fd).st_size < n:
                    os.posix_fallocate(fd, 0, n)
            finally:
                os.close(fd)
        return {"prepared": True}

    def outputs(self, cmd: dict) -> dict:
        self.check_flags()    # after the round, outside the judge's clock
        picked, inputs = {}, {}
        for i in cmd["calls"]:
            if 0 <= int(i) < len(self.kept_outputs):
                picked[str(i)] = write_outputs(self.kept_outputs[int(i)], self.out_dir,
                                               f"r{cmd['tag']}_{i}")
            if 0 <= int(i) < len(self.kept_inputs):
                inputs[str(i)] = write_outputs(self.kept_inputs[int(i)], self.out_dir,
                                               f"q{cmd['tag']}_{i}")
        self.kept_outputs, self.kept_inputs = [], []
        self.slot = 0
        return {"picked": picked, "inputs": inputs}


@contextlib.contextmanager
def nan_filled_empty():
    """During checked calls, ``torch.empty`` and friends return NaN-filled float memory.

    This is torch's own switch (deterministic mode fills uninitialised memory), so an output the
    candidate allocates but does not fully write shows NaN whatever the allocator hands out;
    ``poison`` alone depends on the allocator reusing the poisoned block. Timing runs without it.
    """
    import torch
    was = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # ops without a deterministic variant only warn
            yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)


def poison(device: str, sizes: list[int]) -> None:
    """Fill memory the allocator will hand out next with NaN (the candidate's outputs come from it).

    For each byte size the reference produced (the sizes a candidate allocates), a block of
    exactly that size is filled and freed: the caching allocator (CUDA) and malloc's bins (CPU)
    give the freed block to the next request of that size. A larger block covers the rest.
    """
    import torch
    sizes = [int(n) for n in sizes if isinstance(n, int) and 0 < n < (1 << 40)]
    blocks = []
    for n in sorted(set(sizes))[:16]:
        blocks.append(torch.full(((n + 3) // 4,), float("nan"), dtype=torch.float32,
                                 device=device))
    extra = min(max(sizes or [0]) * 2, 512 * 1024 * 1024)
    if extra:
        blocks.append(torch.full((extra // 4,), float("nan"), dtype=torch.float32, device=device))
    if device.startswith("cuda"):
        torch.cuda.current_stream().synchronize()
    del blocks


def _bound_draw(get_inputs):
    """``exchange.draw`` over the problem's own ``get_inputs``, as it was when loaded."""
    p = types.SimpleNamespace(get_inputs=get_inputs)
    return lambda device, seed: draw(p, device, seed)


def _plain(out: list) -> list:
    """Outputs must be plain tensors: a subclass can defer its work until it is read. A
    negated or conjugated view (``_neg_view``, ``conj``) is the values the caller sees only
    through its bit: its bytes are taken resolved, as the caller would read them (read raw,
    a timed call's output of -y passed while its memory held y:
    candidates/timed_neg_view_output.py)."""
    import torch
    odd = sorted({type(o).__name__ for o in out if type(o) is not torch.Tensor})
    if odd:
        raise Refused("tensor_subclass", f"forward returned {', '.join(odd)} instead of "
                      "torch.Tensor (its values could be computed later, outside the timer)")
    return [o.resolve_conj().resolve_neg() if o.is_conj() or o.is_neg() else o for o in out]


def _load_module(path: Path, name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _warm(device: str) -> None:
    """Pay the first-use costs before a candidate waits: the profiler's start (seconds, the
    first time in a process) and the op tracer's imports."""
    import tempfile

    import torch

    from . import antihack
    from .profile import trace_to_file
    antihack.make_tracer()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        trace_to_file(lambda: torch.ones(8, device=device) + 1, device, path)
    finally:
        os.unlink(path)


def _become(uid: int | None, limits: dict) -> None:
    """Take the unprivileged user (when root) and the resource caps the judge set, as hard
    limits: a soft one under a higher hard limit the process may raise again itself."""
    import resource
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        import ctypes
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)   # PR_SET_NO_NEW_PRIVS: no setuid binaries
    for name, value in limits.items():
        which = getattr(resource, name)
        try:
            soft, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    _keep_cpus()


# seccomp: (audit arch, sched_setaffinity, seccomp) per machine
_SECCOMP = {"x86_64": (0xC000003E, 203, 317), "aarch64": (0xC00000B7, 122, 277)}


def _keep_cpus() -> None:
    """sched_setaffinity refused (EPERM) in every thread of this process and of any process it
    starts (a seccomp filter, synced to all threads): the candidate keeps the CPUs the judge
    has, on which the baselines are timed. Widening them takes no privilege otherwise, and a
    judge pinned to a slice of the host (a bench's) then timed the candidate on more cores
    than eager PyTorch had. Syscalls of another ABI (x32, i386) are refused too, not to go
    around the filter. Where seccomp is missing, nothing is refused."""
    import ctypes
    import platform
    native = _SECCOMP.get(platform.machine())
    if native is None:
        return
    arch, setaffinity, seccomp = native

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint32)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    load, jeq, band, ret = 0x20, 0x15, 0x54, 0x06          # BPF_LD|W|ABS, JMP|JEQ|K, ALU|AND|K
    refuse, allow = 0x00050000 | 1, 0x7FFF0000             # SECCOMP_RET_ERRNO|EPERM, RET_ALLOW
    insns = [(load, 0, 0, 4),                  # seccomp_data.arch
             (jeq, 0, 4, arch),                # another ABI: refuse
             (load, 0, 0, 0),                  # seccomp_data.nr
             (band, 0, 0, 0xBFFFFFFF),         # without x32's bit
             (jeq, 1, 0, setaffinity),
             (ret, 0, 0, allow),
             (ret, 0, 0, refuse)]
    code = (Insn * len(insns))(*[Insn(*i) for i in insns])
    prog = Prog(len(insns), code)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)   # PR_SET_NO_NEW_PRIVS, which a filter needs
    libc.syscall(seccomp, 1, 1, ctypes.byref(prog))   # SET_MODE_FILTER, FILTER_FLAG_TSYNC


def _error(e: BaseException) -> dict:
    from ..errors import BuildError
    from .failures import build_failure, classify_exception
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]
    if isinstance(e, Refused):
        return {"error": {"status": "rejected", "name": e.name, "detail": e.detail}}
    if isinstance(e, BuildError):
        return {"error": {"status": "build_error", "name": "compile_error", "detail": e.message,
                          "log": e.log}}
    if isinstance(e, SyntaxError):
        where = f"{Path(e.filename or 'candidate.py').name}:{e.lineno}: " if e.lineno else ""
        return {"error": {"status": "build_error", "name": "syntax_error",
                          "detail": f"{where}{e.msg}", "log": tb}}
    name, detail = classify_exception(e)
    if build_failure(e):
        return {"error": {"status": "build_error", "name": "compile_error", "detail": detail,
                          "log": tb}}
    return {"error": {"status": "runtime_error", "name": name, "detail": detail, "log": tb}}


def _expose(folders: dict[str, list[str]]) -> None:
    """In this process's own mount namespace: replace each folder by an empty one that others
    may enter, holding only the named entries (bind-mounted from the original)."""
    import ctypes
    import tempfile
    libc = ctypes.CDLL(None, use_errno=True)
    ms_bind, ms_rec, mnt_detach = 4096, 16384, 2

    def mount(src: str, dst: str, fstype: str | None, flags: int, data: str | None) -> None:
        if libc.mount(src.encode(), dst.encode(), fstype.encode() if fstype else None, flags,
                      data.encode() if data else None) != 0:
            raise OSError(ctypes.get_errno(), f"mount {src} on {dst}")

    for folder, entries in folders.items():
        stash = tempfile.mkdtemp(prefix="stitch_expose_")
        for e in entries:
            keep = os.path.join(stash, e)
            src = os.path.join(folder, e)
            if os.path.isdir(src):
                os.mkdir(keep)
            else:
                open(keep, "w").close()
            mount(src, keep, None, ms_bind | ms_rec, None)
        mount("tmpfs", folder, "tmpfs", 0, "mode=0755,size=1m")
        for e in entries:
            keep, dst = os.path.join(stash, e), os.path.join(folder, e)
            if os.path.isdir(keep):
                os.mkdir(dst)
            else:
                open(dst, "w").close()
            mount(keep, dst, None, ms_bind | ms_rec, None)
            libc.umount2(keep.encode(), mnt_detach)


def main(device: str, rfd: int, wfd: int, expose: dict | None = None) -> None:
    faulthandler.enable()
    channel.die_with_parent()
    if expose:
        _expose(expose)
    import torch
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device).index or 0)
        torch.zeros(1, device=device)
        try:   # NVRTC's first use costs most of a second: pay it before a candidate waits
            from ..runtime import build
            build._cuda_core()
        except Exception:  # noqa: BLE001  (a build will say what is missing)
            pass
    _warm(device)
    from . import antihack, timing
    timing.capture()   # the timers as they are before any candidate code
    antihack.refuse_audit_hooks()
    channel.send(wfd, {"ready": True, "pid": os.getpid()})
    job = channel.recv(rfd)
    if job is None or job.get("op") != "job":
        return
    os.chdir(job["folder"])
    _become(job.get("uid"), job.get("limits", {}))
    channel.die_with_parent()
    h = Harness(device, rfd, wfd)
    handlers = {"candidate": h.load_candidate, "trial": h.trial, "call": h.call,
                "prepare": h.prepare, "outputs": h.outputs, "arena": h.map_arena,
                "use_arena": h.use_arena}
    try:
        reply = h.load_problem(job)
    except BaseException as e:  # noqa: BLE001  (the candidate's fault, whatever it raised)
        reply = _error(e)
    channel.send(wfd, reply)
    while "error" not in reply:
        cmd = channel.recv(rfd)
        if cmd is None or cmd.get("op") == "exit":
            return
        try:
            reply = handlers[cmd["op"]](cmd)
        except BaseException as e:  # noqa: BLE001
            reply = _error(e)
        sys.stdout.flush()
        sys.stderr.flush()
        channel.send(wfd, dict(reply, tag=cmd.get("tag")))
    channel.recv(rfd)   # wait to be killed: the judge reads what it needs first


if __name__ == "__main__":
    import json
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
         json.loads(sys.argv[4]) if len(sys.argv) > 4 else None)
