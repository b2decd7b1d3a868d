"""The Verification protocol, judge side: the trusted process that never imports candidate code.

The judge (this module, inside the worker process) holds the problem, the reference model,
the seeds, the expected outputs, the baselines and the kernel cache's secret. The candidate
runs in a sandbox (sandbox.py) started ahead for it and destroyed after it (pool.py). A job:

1. build: the sandbox imports the candidate; every kernel build it asks for is compiled here,
   through the authenticated cache, under the sandbox's user (``build_error`` with the log).
2. trials (>= ``trials``): a fresh seed from the OS per trial, sent with the call that uses it;
   both sides draw ``get_inputs()`` from it (exchange.py); the reference runs here, the
   candidate there; its outputs come back as bytes and are compared here (compare.py:
   tolerance per dtype and per scale), with a second call on the same inputs for determinism.
   One trial, chosen here at random, runs under the profiler: its trace (every thread, every
   stream) is read here for PyTorch fallbacks, device-to-host copies and missing launches.
3. timing: every timed call gets a fresh seed with its command, so its inputs exist only from
   then on; after each round of calls one of them, chosen here after the fact, has its output
   compared (``timed_output_mismatch``); the judge's clock around each call and the traced
   device time bound what the sandbox reports (``patched_timer``). The eager and torch.compile
   baselines run the same protocol here, once per problem.
4. processes: anything the candidate started during the calls (a child still there, or the
   CPU time of children it reaped) is ``subprocess``.

The sandbox's own checks (aliasing, mutated inputs, threads, streams, precision switches,
tensor subclasses) arrive as rejections with their names; it can only make its own verdict
worse. Reasons are stable names (``antihack.REASONS``); ``Verdict.reason`` is "name: detail".
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import os
import re
import secrets
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..verdict import BASELINES_RETIMED, LOAD_CHANGED, TrialResult, Verdict
from .. import gpulock
from . import antihack, profile, sampler, timing
from .arena import ArenaError, Mapped, listen, receive_fd, size_for
from .compare import Print, compare, same, stale_outputs, tolerance, within_reference_error
from .exchange import (FAR, HAND_OVER_BYTES, NEAR, SMALL, Pinned, can_peek, draw, forward_seed,
                       hand_over, let_go_if_large, read_output, reveal, scales, seed_forward,
                       tensors, widen, widened_how, widens_few)
from .options import VerifyOptions
from .pool import Pool, Sandbox

TIME_BUDGET_MS = 100.0      # CUDA: timed calls fill about this much device time ...
MAX_TRIALS = 100            # ... up to this many (each costs two messages and a fresh draw)
ROUND_BYTES = {"cuda": 4 << 30, "cpu": 1 << 30}   # outputs a sandbox keeps between checks
MAX_SETS = 32
# per call, beyond which the judge's clock disagrees with the sandbox: CUDA events and a GPU
# host are steady to tens of microseconds; waking a process on a busy 2-core CPU host takes
# milliseconds (seen: 2-4 ms under load), so there the bound is coarse
CLOCK_SLACK_MS = {"cuda": 0.05, "cpu": 2.0}
CLOCK_SHARE = {"cuda": 0.5, "cpu": 2.0}   # ... or beyond this share of the reported time
# ... or beyond this share of the path's own cost, measured on the reference before the
# candidate loads. Half, not a quarter: a candidate process that started seconds ago still
# has start-up work in flight (seen on the H200: honest 0.16 ms kernels over a 0.7 ms path
# showed 0.3 ms more), and the verdict's time is the judge's clock less that cost anyway, so
# a wider allowance lets no patched timer claim a faster time. Not more on the CPU, where the
# path (an input file read and written, two process wake-ups per call) is as long as a
# forward: allowing the whole path let a timer claiming 2% of a 16 ms forward through on a
# host whose load had lengthened the calibration; the cost is the false positive under
# heavy load written down in RELIABILITY.md
CLOCK_PATH_SHARE = 0.5
PATH_MEDIAN_OVER_LEAST = 2.0   # the most of the path's median the time believes
# A disagreement is a verdict only when it is there on the quietest call (load on the host
# only ever adds time, so the least disagreement is the one noise touches least) and again on
# this many rounds of fresh calls: a patched timer lies on every call, a busy host does not
# stay busy. The time reported is the judge's clock less the path either way, so a lie that
# is let through claims nothing faster.
CLOCK_CONFIRM_ROUNDS = 2
# ... and then on rounds after these waits (seconds): a burst of load can outlast rounds run
# back to back (seen on an H100 host running eight problems: an honest GEMM's calls took
# 1 ms more than its timer said on all three rounds, in the minute its neighbours compiled),
# while a patched timer lies in every round however long the judge waits
CLOCK_RETRY_WAITS_S = (1.0, 3.0)
SEEN_SLACK_SHARE = 0.25     # the least excess the quietest call must show over the timer
CALIBRATION_WARMUP = 2      # calls of the path not counted in the calibration
CALIBRATION_SETTLED = 3     # ... measured until this many calls bring no new least
CALIBRATION_MAX = 16        # ... or this many calls
CALIBRATION_MAX_S = 3.0     # ... or this long
DEVICE_SLACK = 1.5          # traced device time may exceed the timed median by this factor
# eager timed again at a job's start, moved by more than this share since the baselines were
# timed: all of them are timed again (CPU)
BASELINE_DRIFT = 0.3
# eager calls right after a CPU candidate's timed calls, to see the load has not moved since
# the baselines (``Job.confirm_load``)
LOAD_CHECK_CALLS = 3
# builds one candidate may ask the judge for, and bytes of libraries it may be handed: each
# build is kept in the kernel cache after the job (an honest program builds a few kernels of
# kilobytes to a few MB)
JOB_BUILDS = 64
JOB_BUILD_BYTES = 128 << 20
# calls beyond the trial floor a CPU timing makes, at most, for the vetted widenings no timed
# call has met yet (Job.next_wide: up to five, each at the next call whose seed scales its
# way, half of them)
WIDE_WAIT_CALLS = 20
# arena bytes beyond the inputs' and the reference's outputs: each further output tensor's
# alignment (arena.ALIGN), for references that return several
ARENA_SPARE = 64 << 10
ARENA_DRAWS, ARENA_MARGIN = 8, 1.5   # draws the arena is sized from, and the room beyond them
ARENA_MARGIN_FIXED = 1.1             # ... where every draw had the same size
MAX_OUTPUTS = 256           # tensors one timed call may say it returned (each read by the judge)
CHECKED_CALLS = 5           # timed calls whose outputs are checked, picked after each round
PROFILED_CALLS = 5          # timed calls under the profiler, per side; the tab shows the median
# CPU: timed calls in which the judge stops the candidate's threads to see where they are
# (sampler.py): each call is one with this chance, each stopped at up to STOPS_PER_CALL
# moments drawn over the time a call has taken so far; more are made after the timed ones
# until SAMPLE_STOPS stops landed inside calls (a short call ends before most), as many as
# half the timed calls (at least SAMPLED_CALLS_MIN: every call costs a cache flush of tens
# of milliseconds), and past the first two no more once they took SAMPLE_TIME_S (a forward
# of seconds lands its stops in a few calls anyway). Calls go on being sampled past that half,
# up to SAMPLED_CALLS_MAX, while fewer than SAMPLE_WORKING_LEAST samples found a thread in code
# that computes: on a loaded host a few-millisecond forward can see its stops land in the
# interpreter or after the reply, and two samples are too few to judge it by. Only for calls
# of SAMPLE_LANDS_S or more: a stop takes the judge about a millisecond to make, so in a
# shorter call few land at all and more calls would only cost their cache flushes
SAMPLE_ONE_IN = 4
STOPS_PER_CALL = 3
SAMPLE_STOPS = 24
SAMPLED_CALLS_MIN = 4
SAMPLED_CALLS_MAX = 12
SAMPLE_WORKING_LEAST = 6
SAMPLE_LANDS_S = 0.002
SAMPLE_TIME_S = 3.0


@dataclass(frozen=True)
class Calibration:
    """The sandbox's call path timed on the reference: its median and its least, per call;
    ``floor``, the least any job on this problem has timed it at the same way (None for the
    first). Load on the host only lengthens the path, so where this job's calibration ran
    in a busy moment and the candidate's calls in a quiet one, subtracting this job's least
    from the candidate's clock hid that much of its work: the time counted subtracts the
    floor (``path``); the check for a patched timer, which must not call an honest timer a
    liar, keeps this job's own least."""
    median: float
    least: float
    floor: float | None = None

    @property
    def path(self) -> float:
        """The path's cost the time counted subtracts: this job's least, or the floor."""
        return self.least if self.floor is None else min(self.least, self.floor)

    @property
    def steady_median(self) -> float:
        """The median as far as it is believed: up to ``PATH_MEDIAN_OVER_LEAST`` times the
        least. Beyond that the calls were slowed by load on the host while the path was
        timed, and a candidate timed once the load had gone would hide that much of its own
        work in the path (seen on a busy 2-core host: a forward of about 30 ms a call done
        inside the harness's input path passed at 1.33x eager)."""
        return min(self.median, PATH_MEDIAN_OVER_LEAST * self.least)


def _forget_compiled() -> None:
    """Drop torch.compile's code and CUDA graphs in this process (the graphs' trees live in
    the thread that ran them: call it there) and give their memory back to the device."""
    import gc

    import torch
    try:
        torch._dynamo.reset()
        from torch._inductor.cudagraph_trees import reset_cudagraph_trees
        reset_cudagraph_trees()   # not in every version's reset
    except Exception as e:  # noqa: BLE001 - memory kept is a cost, not a wrong verdict
        print(f"the compiled baselines could not be let go: {e}", file=sys.stderr)
    gc.collect()
    torch.cuda.empty_cache()


@dataclass
class Reference:
    """What the judge keeps per problem: the module, the model, the init seed, baselines."""
    source: str
    module: Any
    model: Any
    weight_seed: int
    baselines: dict = field(default_factory=dict)
    trace: dict | None = None                 # a checked call's, for the evidence
    # the model in float64, made the first time an output misses the reference (compare.py:
    # a reference less exact than its tolerance); False where it cannot be made
    model64: Any = None
    timed_traces: list | None = None          # timed calls', for the Profile tab
    compiled: dict = field(default_factory=dict)   # torch.compile'd model per mode
    # the sizes of the outputs of the calls the judge made (the baselines'): the calibration's
    # rounds are sized by the largest, before any trial of the job has said how large they
    # are, and the arena's margin by whether there was more than one
    out_sizes: set = field(default_factory=set)
    # the least cost of the sandbox's call path any job timed, per way of timing it
    # (Calibration.floor)
    path_least: dict = field(default_factory=dict)

    @property
    def out_bytes(self) -> int:
        return max(self.out_sizes, default=0)


@dataclass
class WorkerState:
    """What one judge process keeps between jobs."""
    device: str
    workdir: Path
    threads: int = 1
    references: dict = field(default_factory=dict)
    pool: Pool | None = None
    jobs: int = 0
    timers: dict = field(default_factory=dict)

    def timer(self, flush_mb: int = 0) -> timing.Timer:
        """The judge's flush buffer, kept from job to job: a Timer made per timed call
        faulted in a fresh buffer of up to 256 MB each time (65,536 pages on the CPU)."""
        if flush_mb not in self.timers:
            self.timers.clear()   # one buffer held at a time
            self.timers[flush_mb] = timing.Timer(self.device, flush_mb)
        return self.timers[flush_mb]

    def reference(self, source: str) -> Reference:
        key = hashlib.sha256(source.encode()).hexdigest()
        if key not in self.references:
            import torch
            self.jobs += 1
            path = self.workdir / f"problem_{key[:16]}.py"
            path.write_text(source)
            mod = load_module(path, f"stitch_problem_{key[:16]}")
            seed = secrets.randbits(62)
            from .exchange import seed_all
            seed_all(seed)
            init = list(mod.get_init_inputs())
            seed_all(seed)
            with torch.no_grad():
                model = mod.Model(*init).to(self.device)
            self.references[key] = Reference(source, mod, model, seed)
        return self.references[key]

    def spares(self) -> Pool:
        if self.pool is None:
            self.pool = Pool(self.device, self.threads)
        self.pool.fill(at_most=1)   # the others start after a job (run_verify)
        return self.pool

    def sandbox(self) -> Sandbox:
        return self.spares().take()


class Reject(Exception):
    """A hacking pattern: status "rejected"."""

    def __init__(self, name: str, detail: str = ""):
        self.name, self.detail = name, detail
        super().__init__(f"{name}: {detail}" if detail else name)


class Failed(Exception):
    """The sandbox reported a failure (build, runtime) or died: a verdict of that status."""

    def __init__(self, status: str, name: str, detail: str, log: str = ""):
        self.status, self.name, self.detail, self.log = status, name, detail, log
        super().__init__(f"{name}: {detail}")


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def fresh_seed() -> int:
    """A seed from the OS: nothing in a candidate's process can predict it."""
    return secrets.randbits(62)


def non_finite(outs: list) -> int:
    """How many elements of ``outs`` (floating or complex tensors) are NaN or infinite."""
    import torch
    return sum(int((~torch.isfinite(r)).sum()) for r in outs
               if r.is_floating_point() or r.is_complex())


# --- one job ---------------------------------------------------------------------------------


class Job:
    """One candidate against one problem, seen from the judge."""

    def __init__(self, job: dict, state: WorkerState, deadline: float):
        self.job, self.state, self.deadline = job, state, deadline
        self.opts = VerifyOptions(**job["options"])
        self.device = state.device
        self.ref = state.reference(job["problem_source"])
        self.box: Sandbox | None = None
        self.spare_wait_ms = 0.0
        self.timed_traces: list[dict] = []   # the candidate's timed calls under the profiler
        self.base = {"candidate_id": job.get("candidate_id", ""), "device": self.device}
        self.tol: dict[str, tuple[float, float, str]] = {}
        self.tags = 0
        self.checks_left = 0
        self.last_reply: dict = {}
        self.within_ref = ""   # the reference's own error, where an output was judged within it
        # CPU: the output files of this round's timed calls, pinned as each call answered
        # (exchange.pin_output), until the round's check picks some
        self.pinned: list[list] = []
        self.round_inputs: Any = None   # the last round's picked calls' inputs, as left
        # CUDA: the sandbox's arena, mapped here, which it copies each timed call's outputs
        # and inputs into (arena.py), each call's taken out at once into ``pinned`` and
        # ``pinned_inputs``; unused where it could not be mapped (``arena_note`` says why:
        # the sandbox keeps them)
        self.arena: Mapped | None = None
        self.arena_mapped = False
        self.arena_note = ""
        self.pinned_inputs: list[list] = []
        # timed calls on inputs outside get_inputs()'s range (time_candidate): which calls were
        # (by seed, with how), and how many calls until the next one
        self.wide: dict[int, str] = {}
        self.wide_next: int | None = None
        self.wide_round = 1
        # the widenings a timed call may take, each (how, way: a few places True, whole
        # tensors False), as the range trials vetted them on the reference: the near trial's
        # (its way, and the other where the reference suits it too), the far and the small
        # trials'. A candidate tells a checked trial (deterministic mode) from a timed call,
        # so every range a checked trial probes is probed in timed calls as well (a norm that
        # drops its eps outside checked calls is wrong only on the small draws; a softmax that
        # skips its max pass only on the far ones), and both ways (8 sampled elements tell a
        # whole-tensor scaling from a plain draw, not a few places). ``wide_met``: those a
        # timed call has had
        self.wide_vetted: list[tuple[str, bool]] = []
        self.wide_met: set[tuple[str, bool]] = set()
        self.no_hand_over = False   # CPU: this problem's inputs cannot be handed over
        self.out_bytes = 0     # the largest outputs of a trial, for the rounds' size
        # where the trials' time went (ms): the reference's side (draws, forwards, widened
        # draws), the candidate's calls, reading and judging its outputs
        self.trial_ms = {"reference": 0.0, "candidate": 0.0, "judge": 0.0}
        self.no_float64 = False   # the float64 reference ran out of memory in this job
        self.peek = False   # CPU: the judge reads timed calls' outputs from the sandbox (open)
        self.sampler: sampler.Sampler | None = None   # CPU: where its threads are (open)
        # builds asked for and bytes of library handed over (build): the kernel cache keeps
        # every build past the job, so one candidate may not fill its disk
        self.builds, self.built_bytes = 0, 0
        # the libraries built here and copied in (build): path -> (device, inode)
        self.handed: dict[str, tuple[int, int]] = {}
        self.rng_key = secrets.token_bytes(16)   # forward seeds (exchange.forward_seed)
        self.frozen_s = 0.0   # how long the last command's sandbox was stopped to be sampled
        self.opened = False   # the sandbox has the problem (``open``): it holds GPU memory now

    def take_sandbox(self) -> None:
        """A spare for this candidate, waited for if it is still starting up."""
        t0 = time.perf_counter()
        self.box = self.state.sandbox()
        self.spare_wait_ms = (time.perf_counter() - t0) * 1e3

    @property
    def sandbox(self) -> Sandbox:
        """The candidate's process, from ``take_sandbox`` (before ``run``) on."""
        if self.box is None:
            raise RuntimeError("the job has no sandbox yet: take_sandbox() takes one")
        return self.box

    # -- talking to the sandbox --
    def ask(self, msg: dict, stops: list[float] | None = None) -> dict:
        """Send a command and wait for its reply, serving the sandbox's build requests.

        ``stops``: moments (seconds after the command, the time stopped not counted) at which
        the sandbox, still busy with it, is stopped and sampled (``self.frozen_s``: how long
        it was kept stopped)."""
        self.tags += 1
        tag = self.tags
        box = self.sandbox
        box.send(dict(msg, tag=tag))
        self.frozen_s = 0.0
        sent = time.perf_counter()
        early: dict | None = None   # a reply that came before the last stop
        built = 0.0                 # time the judge spent building for it meanwhile
        for at in stops or []:
            if self.sampler is None:
                break
            while early is None and box.readable(
                    sent + self.frozen_s + built + at - time.perf_counter()):
                got = self.receive()
                if got.get("op") == "build":   # served, and the stops go on (from where the
                    t0 = time.perf_counter()   # build left the call): a build asked for
                    box.send(self.build(got))  # mid-call must not end the sampling
                    built += time.perf_counter() - t0
                else:
                    early = got
            if early is not None:
                break   # answered before this moment
            t0 = time.perf_counter()
            with box.frozen():
                self.sampler.sample()
            self.frozen_s += time.perf_counter() - t0
            # a process the candidate started, running in the middle of a call: work no
            # sample of its own process shows, and gone before any check after the call
            # when it is reaped by the kernel (SIGCHLD ignored: no CPU time counted either)
            strays = box.strays()
            if strays:
                raise Reject("subprocess", "a process the candidate started (pid "
                             f"{', '.join(map(str, strays[:4]))}) was running in the middle "
                             "of a timed call")
        while True:
            reply, early = (early, None) if early is not None else (self.receive(), None)
            if reply.get("op") == "build":
                box.send(self.build(reply))
                continue
            if "error" in reply:
                err = reply["error"] if isinstance(reply["error"], dict) else {}
                status = err.get("status", "runtime_error")
                if status == "rejected":
                    raise Reject(str(err.get("name", "")), str(err.get("detail", "")))
                raise Failed(status if status in ("build_error", "runtime_error")
                             else "runtime_error", str(err.get("name", "exception")),
                             str(err.get("detail", "")), str(err.get("log", "")))
            if msg.get("op") != "job" and reply.get("tag") != tag:
                raise Reject("protocol_tampering", "a reply that answers no command of the "
                             "judge's arrived from the candidate's process")
            self.last_reply = reply
            return reply

    def receive(self) -> dict:
        """The sandbox's next message; its death, its silence past the deadline or a garbled
        frame is the job's verdict."""
        box = self.sandbox
        try:
            reply = box.recv(max(0.0, self.deadline - time.monotonic()))
        except Exception as e:  # noqa: BLE001  (channel.ProtocolError)
            raise Reject("protocol_tampering", f"the candidate's process sent {e}") from None
        if reply is None:
            if box.alive and time.monotonic() < self.deadline:
                try:   # the pipe closed before the process was gone: let it finish dying
                    box.proc.wait(timeout=5)
                except Exception:  # noqa: BLE001  (still alive: a timeout below)
                    pass
            if box.alive:
                raise Failed("timeout", "timeout", "the job ran past its time limit and the "
                             "candidate's process was killed")
            raise Failed("runtime_error", "crash", f"the candidate's process died "
                         f"({box.exit_reason()})", box.log_tail())
        return reply

    def build(self, req: dict) -> dict:
        """A kernel the sandbox asked for: compiled here, copied into its folder."""
        from ..errors import BuildError
        from ..runtime import kernels
        try:
            lang, name = str(req.get("lang")), str(req.get("name", "kernel"))
            if lang not in ("c", "cuda"):
                raise BuildError(f"unknown kernel language {lang!r}")
            arch = (kernels._cuda_arch(kernels._cuda_device_index()) if lang == "cuda"
                    else kernels._host_arch())
            # a user of its own for the compiler: not the candidate's, whose process is alive
            builder = None if self.sandbox.uid is None else self.sandbox.uid + 1
            if self.builds >= JOB_BUILDS or self.built_bytes >= JOB_BUILD_BYTES:
                raise BuildError(f"kernel {name!r}: this candidate has asked for "
                                 f"{self.builds} builds ({self.built_bytes >> 20} MB of "
                                 f"libraries); at most {JOB_BUILDS} and "
                                 f"{JOB_BUILD_BYTES >> 20} MB are built for one candidate",
                                 hint="build each kernel once, at import or in __init__")
            self.builds += 1
            for _ in range(2):
                path = kernels.build_cached(lang, str(req.get("source", "")), name,
                                            tuple(str(f) for f in req.get("flags", [])), arch,
                                            user=builder)
                # an evictor that had looked at the entry before this hit marked it used may
                # remove it right after: then it is built again (now marked, it stays)
                if path.exists():
                    break
            self.built_bytes += os.path.getsize(path)
        except BuildError as e:
            return {"error": e.message, "log": e.log, "hint": e.hint}
        target, ident = self.sandbox.lend(f"lib_{secrets.token_hex(8)}{Path(path).suffix}",
                                          src=path)
        self.handed[str(target)] = ident
        return {"path": str(target)}

    # -- the protocol --
    def open(self, box: Sandbox) -> None:
        """Give a sandbox the problem and the candidate's files; it loads the problem."""
        self.box, self.opened = box, True
        folder = box.folder
        box.give("problem.py", self.job["problem_source"].encode())
        box.give("candidate.py", self.job["candidate_source"].encode())
        reply = self.ask({"op": "job", "folder": str(folder), "outputs": str(box.outputs),
                          "uid": box.uid, "threads": self.state.threads,
                          "weight_seed": self.ref.weight_seed, "limits": _limits(self.device)})
        # CPU timed calls' outputs read out of the sandbox's memory where the judge can
        # (exchange.peek_output); learnt before the candidate's code is loaded
        self.peek = not self.device.startswith("cuda") and can_peek(box.proc.pid,
                                                                    reply.get("probe"))
        if not self.device.startswith("cuda"):
            self.sampler = sampler.Sampler(box.proc.pid, (str(box.folder), str(box.staging)),
                                           own_files=self.handed)

    def run(self) -> dict:
        flags: list[str] = []
        self.draw(fresh_seed())   # inputs too large for this machine are said here, with sizes
        if self.opts.time:   # before any candidate process is up: nothing can slow them down
            self.baselines(flags, recheck=True)
        gpulock.release_cached_memory(self.device)   # the candidate's process gets what the judge held
        phases: dict[str, float] = {}
        clock = time.perf_counter()

        def phase(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            phases[f"phase:{name}"] = (now - clock) * 1e3
            clock = now

        phases["phase:spare"] = self.spare_wait_ms   # waiting for a spare still starting up
        self.open(self.sandbox)
        if self.opts.time and self.device.startswith("cuda"):
            self.map_arena()
            if not self.arena_mapped:
                flags.append(f"timed_outputs_kept_by_sandbox:{self.arena_note}")
        # the sandbox's own call path, timed on the reference before any candidate code runs
        calibration = self.calibrate() if self.opts.time else Calibration(0.0, 0.0)
        if self.opts.time:
            key = (self.device, self.peek, self.arena_mapped, self.opts.cpu_flush_mb)
            known = self.ref.path_least.get(key)
            self.ref.path_least[key] = min(calibration.least, known or math.inf)
            if known is not None:
                # no lower than this job's least less the path's own spread (the clock's
                # slack at least): a host busy through a whole job, calibration and calls
                # alike, must not count the load's share of the path against the candidate
                kind = "cuda" if self.device.startswith("cuda") else "cpu"
                spread = max(calibration.steady_median - calibration.least, CLOCK_SLACK_MS[kind])
                calibration = replace(calibration, floor=max(known, calibration.least - spread))
                if calibration.path < calibration.least:
                    flags.append(f"path_floor:{calibration.least:.3g}->{calibration.path:.3g} ms")
        phase("calibrate")
        loaded = self.ask({"op": "candidate"})
        phase("load")
        ticks = self.sandbox.child_cpu_ticks()
        trials, traced, outs, refs = self.trials()
        phase("trials")
        phases.update({f"phase:trials.{k}": v for k, v in self.trial_ms.items()})
        result = self.judge_trials(trials, traced, outs, refs, loaded)
        phase("judge")
        if result["status"] != "pass":
            return result
        timings = {"build": float(loaded.get("build_ms", 0.0))}
        samples = None
        if self.opts.time:
            timings.update(self.baselines([]))
            timings.update(self.time_candidate(traced, calibration))
            if not self.device.startswith("cuda"):
                self.confirm_load(timings["eager"], flags)
            phase("timing")
            samples = self.judge_samples(loaded, flags)
        if self.opts.profile and traced.get("trace") is not None:
            result["profile"] = self.profiles(traced["trace"])
            phase("profile")
        if samples:   # where its threads were, for the Profile tab
            result["profile"] = dict(result.get("profile") or {}, samples=samples)
        self.check_processes(ticks)
        result.update(timings=dict(timings, **phases), flags=flags, correct=True)
        _speedups(result)
        return result

    def map_arena(self) -> None:
        """CUDA: the sandbox's arena, mapped here while the sandbox holds nothing of the
        candidate (its reply is the harness's own), and a token read back through it. Sized
        for the largest inputs of ``ARENA_DRAWS`` draws and the reference's largest outputs,
        each tensor on its boundary, with room beyond (``ARENA_MARGIN``)."""
        sizes = set()   # inputs whose size a draw decides: the largest of several, and a margin
        for _ in range(ARENA_DRAWS):
            xs = self.draw(fresh_seed())
            sizes.add(size_for([x.numel() * x.element_size() for x in xs if hasattr(x, "numel")]))
            del xs
        let_go_if_large(max(sizes), self.device)   # the draws' memory, for the sandbox
        # draws, and the baselines' outputs, all of one size (nearly every problem): a small
        # margin, where the large one was GBs of the GPU the two processes share; outputs
        # whose size the values decide (nonzero, unique) keep the large one
        fixed = len(sizes) == 1 and len(self.ref.out_sizes) <= 1
        margin = ARENA_MARGIN_FIXED if fixed else ARENA_MARGIN
        nbytes = int(margin * (max(sizes) + size_for([self.ref.out_bytes]))) + ARENA_SPARE
        token = secrets.token_bytes(16)
        # a socket in the sandbox's own folder (its uid's alone): no other process can reach it
        path = str(self.sandbox.folder / f"arena-{secrets.token_hex(8)}.sock")
        listener = listen(path, self.sandbox.uid)
        try:
            reply = self.ask({"op": "arena", "nbytes": nbytes, "token": token.hex(),
                              "socket": path})
            if not reply.get("mapped"):
                self.arena_note = str(reply.get("why", "the sandbox could not make it"))[:300]
            else:
                size = reply.get("nbytes")
                self.arena = Mapped(receive_fd(listener, self.sandbox.proc.pid),
                                    size if isinstance(size, int) else -1, self.device)
                (probe,) = self.arena.take(reply.get("probe"))
                got = probe.read() if not probe.error else None
                if got is None or bytes(got.cpu().numpy().tobytes()) != token:
                    self.arena_note = "the token written into the arena did not read back"
        except (Reject, Failed):
            raise
        except Exception as e:  # noqa: BLE001  (refused by the driver or the kernel)
            self.arena_note = f"{type(e).__name__}: {e}"[:300]
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
        if self.arena_note:
            self.free_arena()
        # the sandbox uses it only if the judge can: else it keeps a round's outputs itself
        self.ask({"op": "use_arena", "use": not self.arena_note})
        self.arena_mapped = not self.arena_note
        if not self.arena_mapped:
            print(f"timed calls' outputs stay in the sandbox until checked: {self.arena_note}",
                  file=sys.stderr)

    def free_arena(self) -> None:
        """The mapping let go, once the sandbox is destroyed."""
        if self.arena is not None:
            with contextlib.suppress(ArenaError):
                self.arena.close()
            self.arena = None

    def calibrate(self) -> Calibration:
        """(The judge's clock - the sandbox's timer) per call, on the reference, in the
        sandbox, while nothing of the candidate is loaded: what the path itself costs."""
        extra: list[float] = []
        # calls before the measured ones: a process's first large allocations fault their
        # pages in, which later calls (the candidate's) do not pay. Then calls until the
        # path has settled (no new least for CALIBRATION_SETTLED calls). In rounds, as the
        # timed calls go: on the CPU a round's output files are written over by the next
        # round's calls, and memory a process touches for the first time is slow (on a
        # 2-core host a path of 50-70 ms per call where the same path over reused files took
        # 12), so a calibration over fresh files let a timer claiming 2% of its forward
        # through
        least, since = math.inf, 0
        start, per_round = time.monotonic(), self.calls_per_round()
        while True:
            ms, _, seen = self.remote_call(fresh_seed(), keep=False)
            extra.append(seen - ms)
            if len(extra) % per_round == 0:
                self.end_round([])
            kept = extra[CALIBRATION_WARMUP:]
            if kept and kept[-1] < 0.95 * least:
                least, since = kept[-1], 0
            elif kept:
                since += 1
            if len(kept) >= max(3, self.opts.warmup + 1) and (
                    since >= CALIBRATION_SETTLED or len(kept) >= CALIBRATION_MAX
                    or time.monotonic() - start > CALIBRATION_MAX_S):
                break
        self.end_round([])
        # the median of the settled calls only: the path's spread once warm
        return Calibration(statistics.median(kept[-(since + 1):] if since >= 2 else kept),
                           min(kept))

    def trials(self) -> tuple[list[TrialResult], dict, list, list]:
        import torch
        n = max(1, self.opts.trials)
        # three trials more, at places picked here (never the first), on inputs outside the
        # range get_inputs() draws from: near it (times -2, 2 or -1) and twice far from it
        # (each element times 64, 16 or 1/16, either sign), once at a few places and once
        # whole (each catches what the other may not: a guard that samples the input sees
        # nothing of a few places, and a bug that needs one large element in a row, as exp's
        # overflow does, rarely meets one of a few), the two of opposite signs where the
        # reference takes both (each sign drawn alone left exp's large positive inputs out
        # of both one job in four); and one more whole and small (times 1/16, either sign:
        # the mix of factors keeps every row's size, and a norm that drops its eps, or a
        # guard against tiny rows, is wrong only on small rows). The profiler's trial is one
        # of the others
        wide_trial, far_few, far_whole, small = secrets.SystemRandom().sample(range(1, n + 4), 4)
        others = [t for t in range(n + 4) if t not in (wide_trial, far_few, far_whole, small)]
        traced_trial = others[secrets.randbelow(len(others))]
        trials, outs, refs = [], [], []
        traced: dict[str, Any] = {}
        far_sign = secrets.randbelow(2) == 0   # the few places' first sign; the whole's other
        split = time.perf_counter()

        def spent(part: str) -> None:
            nonlocal split
            now = time.perf_counter()
            self.trial_ms[part] += (now - split) * 1e3
            split = now
        for t in range(n + 4):
            seed = fresh_seed()
            while t in (far_few, far_whole, small) and widens_few(seed) != (t == far_few):
                seed = fresh_seed()
            xs = self.draw(seed)
            in_bytes = sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))
            with torch.no_grad():
                ref_out = [r.detach() for r in tensors(self.reference(self.ref.model, xs, seed))]
            del xs
            how = None
            if t == wide_trial:
                how, ref_out = self.widened(seed, ref_out)
            elif t in (far_few, far_whole):
                first = FAR[0] if far_sign == (t == far_few) else FAR[0][::-1]
                how, ref_out = self.widened(seed, ref_out, first + _shuffled(FAR[1]))
            elif t == small:
                how, ref_out = self.widened(seed, ref_out, _shuffled(SMALL))
            if how is not None:   # the timed calls' widened draws use it too (next_wide)
                self.vet(how, widens_few(seed))
                if t == wide_trial and self.vets_other_way(how, widens_few(seed)):
                    self.vet(how, not widens_few(seed))
            sizes = [r.numel() * r.element_size() for r in ref_out]
            self.out_bytes = max(self.out_bytes, sum(sizes))
            let_go_if_large(in_bytes + sum(sizes), self.device)   # the draws' memory, for the sandbox
            spent("reference")
            reply = self.ask_trial(seed, how, in_bytes,
                                   {"op": "trial", "sizes": sizes, "first": t == 0,
                                    "trace": t == traced_trial, "second": t < 2})
            spent("candidate")
            self.sandbox_split(reply.get("split"))
            # the second call's outputs are read in place: compared with the first's at once,
            # before any other command (one copy of GBs fewer beside the candidate's)
            taken = (self.from_arena(reply.get("outputs")),
                     self.from_arena(reply.get("second"), copy=False))
            truth = self.truth(seed, how)
            got, res = self.read(taken[0], ref_out, truth, far=how is None)
            second = None
            if got is not None:
                second, res2 = self.read(taken[1], ref_out, far=how is None)
                # a second call may differ from the first as far as a right answer may (float
                # atomics in a sum, over outputs that are rounding noise: compare._within_noise)
                if second is not None and all(r["ok"] for r in res) and not all(
                        same(a, b) or compare(a, b, *self.tol_for(b)[:2], far=how is None)["ok"]
                        for a, b in zip(second, got)) and not all(
                        self.judge_output(a, r, truth, i, far=how is None)["ok"]
                        for i, (a, r) in enumerate(zip(second, ref_out))):
                    res = [dict(res[0], ok=False, reason="nondeterministic",
                                msg="nondeterministic: a second call on the same inputs "
                                "differs")]
                elif second is None and t < 2 and all(r["ok"] for r in res):
                    # asked for and unreadable (another number of outputs, a bad file): the
                    # check above must not be skipped for want of something to compare
                    res = [dict(res[0], ok=False, reason="nondeterministic",
                                msg="nondeterministic: a second call on the same inputs "
                                f"returned outputs unlike the first's ({res2[0]['msg']})")]
            ok = all(r["ok"] for r in res)
            if how is not None and not ok and got is not None:
                res = [dict(r, reason="input_range", msg=f"on a draw of get_inputs() "
                            f"{widened_how(how, seed)} (the same shapes and dtypes, outside the "
                            f"range it draws from): {r['reason']}: {r['msg']}") if not r["ok"] else r
                       for r in res]
            trials.append(TrialResult(
                seed=seed, ok=ok, max_abs_err=max((r["abs"] for r in res), default=0.0),
                max_rel_err=max((r["rel"] for r in res), default=0.0),
                mismatches=sum(r["mismatches"] for r in res),
                message="; ".join(f"{r['reason']}: {r['msg']}" for r in res if not r["ok"])))
            # prints, not the tensors: five trials' outputs may not fit beside the candidate's
            outs.append([Print(g) for g in got or []])
            refs.append([Print(r) for r in ref_out])
            del got, second, ref_out, taken, truth   # the GPU memory goes back before the next trial
            traced["aten_ops"] = _merge(traced.get("aten_ops", {}), reply.get("aten_ops"))
            if t == traced_trial:   # a profiled trial without its trace is switched-off evidence
                traced["trace"] = self.read_trace(reply.get("trace"))
            spent("judge")
        let_go_if_large(self.out_bytes, self.device)   # the trials' memory, for the timed calls
        return trials, traced, outs, refs

    def sandbox_split(self, split: Any) -> None:
        """The sandbox's own account of a trial's time (its draws, the call, its checks, the
        outputs' sending, the second call), added to the verdict's phases. Said by the
        candidate's process, so only read as known names and bounded numbers, and never
        judged: where the candidate's side of the trials went, for whoever reads a timing."""
        if not isinstance(split, dict):
            return
        for part in SANDBOX_PARTS:
            ms = split.get(part)
            if isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 <= ms < 1e7:
                key = f"sandbox.{part}"
                self.trial_ms[key] = self.trial_ms.get(key, 0.0) + float(ms)

    def rng(self, seed: int) -> int:
        """The seed both sides start a forward on the draw of ``seed`` from."""
        return forward_seed(self.rng_key, seed)

    def reference(self, model: Any, xs: list, seed: int) -> Any:
        """``model`` (the reference, or its float64 copy) on ``xs``, the draw of ``seed``,
        from that draw's forward seed: training-mode dropout draws the candidate's mask."""
        seed_forward(self.rng(seed))
        return model(*xs)

    def ask_trial(self, seed: int, how: str | None, in_bytes: int, cmd: dict) -> dict:
        """A trial's command with its inputs (``in_bytes`` in all) drawn here and handed over
        where they can travel that way (``exchange.hand_over``: contiguous, up to 256 MB), so
        no command says which trial is the one outside get_inputs()'s range; else the seed and
        the widening, for the sandbox to draw."""
        import torch
        handed = None
        cmd = dict(cmd, rng=self.rng(seed))
        if in_bytes <= HAND_OVER_BYTES:
            xs = widen(self.draw(seed), how, seed)
            if all(x.is_contiguous() for x in xs if isinstance(x, torch.Tensor)):
                handed = hand_over([x.cpu() if isinstance(x, torch.Tensor) else x for x in xs],
                                   self.sandbox.staging, secrets.token_hex(8))
            del xs
        if handed is None:
            return self.ask(dict(cmd, seed=seed, widen=how))
        moved = reveal(handed, self.sandbox.inputs) or []
        try:
            return self.ask(dict(cmd, inputs=moved))
        finally:
            for e in moved:
                if "path" in e:
                    os.unlink(e["path"])

    def widened(self, seed: int, plain: list,
                ways: tuple[str, ...] = NEAR) -> tuple[str | None, list]:
        """(how, the reference's outputs) for the first of ``ways`` (in their order) on which
        the reference raises nothing, keeps its output shapes and is as finite as on the draw
        itself (``plain``); (None, plain) when there is none. An output right on
        get_inputs()'s range only (|x| = x on torch.rand's draws, a polynomial good on
        [0, 1)) is wrong there: ``input_range``."""
        drawn = self.draw(seed)
        floating = any(scales(x, "-x") for x in drawn)
        # not one that changes nothing, nor integers beside floating inputs (index tensors:
        # targets, positions), nor integers on a GPU, where an index out of range is a
        # device-side assert that would end the judge's CUDA context, not an exception
        usable = [w for w in ways if any(scales(x, w) for x in drawn) and not (
            w.endswith(" int") and (floating or self.device.startswith("cuda")))]
        del drawn
        for how in usable:
            out = self.widened_outputs(seed, how, plain)
            if out is not None:
                return how, out
        return None, plain

    def widened_outputs(self, seed: int, how: str, plain: list) -> list | None:
        """The reference's outputs on the draw of ``seed`` widened ``how``, or None where it
        raises, changes its output shapes or is less finite than on the draw (``plain``)."""
        import torch

        try:
            with torch.no_grad():
                out = [r.detach() for r in
                       tensors(self.reference(self.ref.model,
                                              widen(self.draw(seed), how, seed), seed))]
        except Exception:  # noqa: BLE001  (a reference that refuses it: not that way)
            return None
        if [r.shape for r in out] != [r.shape for r in plain] \
                or non_finite(out) > non_finite(plain):
            return None
        return out

    def plain_outputs(self, seed: int) -> list:
        """The reference's outputs on the draw of ``seed`` as get_inputs() makes it."""
        import torch
        with torch.no_grad():
            return [r.detach() for r in
                    tensors(self.reference(self.ref.model, self.draw(seed), seed))]

    def vets_other_way(self, how: str, way: bool) -> bool:
        """Whether ``how`` suits the reference (``widened_outputs``) when it scales the other
        way from the range trial's (``way``: a few places or not), on a draw whose seed scales
        so. Only a CPU's timed calls are widened, so only there is it asked."""
        if self.device.startswith("cuda"):
            return False
        seed = fresh_seed()
        while widens_few(seed) == way:
            seed = fresh_seed()
        try:
            plain = self.plain_outputs(seed)
        except Exception:  # noqa: BLE001  (a draw the reference refuses: that way is not used)
            return False
        return self.widened_outputs(seed, how, plain) is not None

    def truth(self, seed: int, how: str | None = None) -> Any:
        """A function giving the reference's outputs on the draw of ``seed`` computed in
        float64, or None where they cannot be had (a model without float64 kernels, out of
        memory): run at most once, and only if an output misses the reference."""
        done: list = []

        def outputs() -> list | None:
            if not done:
                done.append(self.float64_outputs(seed, how))
            return done[0]
        return outputs

    def float64_outputs(self, seed: int, how: str | None) -> list | None:
        import copy

        import torch
        ref = self.ref
        if self.no_float64:
            return None
        try:
            if ref.model64 is None:
                ref.model64 = copy.deepcopy(ref.model).double()
            if ref.model64 is False:
                return None
            xs = self.draw(seed)
            xs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                  for x in (widen(xs, how, seed) if how else xs)]
            with torch.no_grad():
                return [r.detach() for r in tensors(self.reference(ref.model64, xs, seed))]
        except Exception as e:  # noqa: BLE001  (no float64 answer: the plain comparison stands)
            if not _out_of_memory(e):   # this problem has none, ever
                ref.model64 = False
            self.float64_ran_out(e)
            return None

    def float64_ran_out(self, e: BaseException) -> None:
        """After a float64 computation failed: out of memory ends float64 for this job only.
        The device is shared with the candidate's process, which may hold all of it (and miss
        on purpose), and a problem remembered without its float64 form would judge every
        later candidate without it. In any form: torch's OutOfMemoryError, the CPU
        allocator's RuntimeError, the inputs drawn again (``draw``'s Failed)."""
        if _out_of_memory(e):
            self.no_float64 = True
        if self.device.startswith("cuda"):
            import torch
            torch.cuda.empty_cache()

    def draw(self, seed: int) -> list:
        """The reference's inputs; running out of memory there is the problem's size."""
        try:
            return draw(self.ref.module, self.device, seed)
        except Exception as e:  # noqa: BLE001  (re-raised unless it is out of memory)
            from .failures import classify_exception
            name, detail = classify_exception(e)
            if name != "out_of_memory":
                raise
            asked = re.search(r"allocate (\d+(?:\.\d+)?) ?(bytes|[KMGT]iB)", detail)
            size = ""
            if asked:
                scale = {"bytes": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30,
                         "TiB": 2 ** 40}
                gib = float(asked.group(1)) * scale[asked.group(2)] / 2 ** 30
                size = f" ({gib:.2f} GiB asked, {_memory_limit(self.device)})"
            if not self.opened:   # the candidate's process holds nothing yet: the problem's size
                raise Failed("runtime_error", "out_of_memory", "the problem's get_inputs() "
                             f"needs more memory than the {self.device} Verifier may use{size}: "
                             f"{detail}") from None
            raise Failed("runtime_error", "out_of_memory", "the judge's inputs did not fit "
                         f"beside the candidate's process{size}: the Verifier holds several "
                         "copies of a problem's inputs and outputs at once (its reference's, "
                         "the candidate's and their checks'), so a problem whose inputs and "
                         "outputs take more than about a tenth of the device cannot be judged "
                         f"here; use a device with more memory or smaller sizes: {detail}"
                         ) from None

    def tol_for(self, ref: Any) -> tuple[float, float, str]:
        key = str(ref.dtype)
        if key not in self.tol:
            self.tol[key] = tolerance(ref.dtype, self.opts.atol, self.opts.rtol)
        return self.tol[key]

    def from_arena(self, entries: Any, copy: bool = True) -> Any:
        """A checked call's output entries with those the sandbox placed in the arena copied
        out now, as the call answers (``Pinned``); file entries as they are. Without an
        arena in use every entry must be a file (``read`` says so of any other)."""
        if not (self.arena_mapped and self.arena is not None and isinstance(entries, list)) \
                or len(entries) > MAX_OUTPUTS:   # ``read`` refuses them: none copied first
            return entries
        at = [i for i, e in enumerate(entries) if not (isinstance(e, dict) and "path" in e)]
        out = list(entries)
        # in one ``take``, which bounds what one reply may copy out (no more than the arena)
        for i, got in zip(at, self.arena.take([entries[i] for i in at], copy) if at else []):
            out[i] = got
        return out

    def read(self, entries: Any, ref_out: list, truth: Any = None,
             far: bool = True) -> tuple[list | None, list[dict]]:
        """The sandbox's outputs next to the reference's: (tensors or None, comparisons).
        ``truth``: the reference's outputs in float64 on demand (``truth``), if any; ``far``:
        compare's count of small values far off (not on a widened draw: ``compare``)."""
        if not isinstance(entries, list) or len(entries) != len(ref_out):
            n = len(entries) if isinstance(entries, list) else 0
            return None, [{"ok": False, "reason": "output_count", "abs": math.inf,
                           "rel": math.inf, "mismatches": 0,
                           "msg": f"{n} outputs where the reference has {len(ref_out)}"}]
        got, res = [], []
        for entry, ref in zip(entries, ref_out):
            t = read_output(entry, ref, str(self.box.outputs) if self.box else None)
            if isinstance(t, str):
                name, _, msg = t.partition(": ")
                if name == "protocol":
                    raise Reject("protocol_tampering", msg)
                return None, [{"ok": False, "reason": name, "abs": math.inf, "rel": math.inf,
                               "mismatches": ref.numel(), "msg": msg}]
            got.append(t)
            res.append(self.judge_output(t, ref, truth, len(got) - 1, far))
        return got, res

    def judge_output(self, out: Any, ref: Any, truth: Any, index: int,
                     far: bool = True) -> dict:
        """One output against the reference; where that fails, against the reference computed
        in float64 (``truth()[index]``) within the reference's own error of it, in case the
        reference is the less exact of the two. The verdict's tolerance then says so
        (``self.within_ref``)."""
        atol, rtol = self.tol_for(ref)[:2]
        res = compare(out, ref, atol, rtol, far=far)
        # only values can be nearer exact arithmetic than the reference: NaN where the
        # reference has numbers is unwritten memory, whatever the precision, and a shape or
        # dtype is wrong in any precision (not worth a float64 forward)
        if res["ok"] or truth is None or not ref.is_floating_point() \
                or res["reason"] != "output_mismatch":
            return res
        exact = truth()
        if not exact or index >= len(exact):
            # say so: "104 of 262144 out of tolerance" alone reads as a wrong program where it
            # may be a less exact reference that nothing could be checked against
            res["msg"] += ("; the reference could not be computed in float64 to tell which of "
                           "the two is the more exact" + (" (out of memory)" if self.no_float64
                                                          else ""))
            return res
        try:
            wide = within_reference_error(out, ref, exact[index], atol, rtol)
        except Exception as e:  # noqa: BLE001  (out of memory: the plain comparison stands)
            if not _out_of_memory(e):
                raise
            self.float64_ran_out(e)
            return res
        # where nothing was widened (the reference too far from float64, or errors with a
        # tail) its message still says why the reference's error earned nothing
        if wide["ok"] and "widened" in wide:
            self.within_ref = ("" if wide.get("noise") else "within the tolerance plus a few "
                               "times the reference's own error, ") + "since " + wide["widened"]
        return wide

    def read_trace(self, path: Any) -> dict:
        """The trace of the call just answered, from the only file it may be in: the sandbox
        names the path, but a path elsewhere (the judge's files) is not read."""
        want = self.sandbox.folder / f"trace_{self.tags}.json"
        if str(path) != str(want):
            raise Reject("trace_tampering", f"the profiler's trace was reported at {path!s:.200}"
                         f", not at {want.name} in the sandbox's folder")
        try:
            return profile.read_trace(str(want))
        except (OSError, ValueError, RecursionError, MemoryError) as e:   # nested past the
            # parser's depth (100000 arrays in 200 KB) was the judge's error, not the candidate's
            raise Reject("trace_tampering", f"the profiler's trace could not be read: {e}"
                         ) from None

    def judge_trials(self, trials, traced, outs, refs, loaded) -> dict:
        """Correctness, fallbacks and the trace's evidence -> the verdict so far."""
        tol = sorted({self.tol_for(r)[2] for rs in refs for r in rs})
        atol, rtol = (self.tol_for(refs[0][0])[:2] if refs and refs[0] else (None, None))
        result = dict(self.base, trials=trials, aten_ops=dict(sorted(traced.get(
            "aten_ops", {}).items())), atol=atol, rtol=rtol, tolerance="; ".join(tol) + (
                f"; judged against the reference computed in float64 {self.within_ref}"
                if self.within_ref else ""),
            max_abs_err=max((t.max_abs_err for t in trials), default=None),
            max_rel_err=max((t.max_rel_err for t in trials), default=None),
            timings={"build": float(loaded.get("build_ms", 0.0))})
        stale = stale_outputs(outs, refs, [t.ok for t in trials])
        evidence = self.evidence(traced, loaded)
        if stale:
            evidence.insert(0, stale)
        if evidence:
            name, detail = evidence[0]
            return dict(result, status="rejected", reason=f"{name}: {detail}")
        # a failure on get_inputs()'s own draws says more than one outside their range
        bad = sorted((t for t in trials if not t.ok),
                     key=lambda t: t.message.startswith("input_range"))
        if bad:
            first = bad[0].message.split(";")[0] if bad[0].message else "output_mismatch"
            return dict(result, status="incorrect", reason=first)
        return dict(result, status="pass")

    def evidence(self, traced: dict, loaded: dict) -> list[tuple[str, str]]:
        """What the trace and the traced ops say of fallbacks (trusted reading of the trace)."""
        replaced, kept = self.claims(loaded)
        trace = traced.get("trace") or {}
        ops = _merge(_by_name(traced.get("aten_ops", {})), _by_name(profile.cpu_ops(trace)))
        ref_ops = profile.cpu_ops(self.reference_trace()) if trace else {}
        found = []
        fallback = antihack.find_fallback(ops, replaced=replaced, kept=kept,
                                          reference_ops=ref_ops)
        if fallback:
            found.append(("pytorch_fallback", "ran " + ", ".join(
                f"{op} x{ops[op]}" for op in fallback[:8])))
        elif replaced is None and trace:   # library work of a kind the reference never
            # does is a fallback, whatever KEPT_OPS says (a GEMM doing a pointwise problem's
            # affine map); one of a kind it does is not (mm where the reference runs addmm):
            # a library op stands for its family (aten.library_family)
            ref_lib = {antihack.norm(o) for o in ref_ops if antihack.op_class(o) == "library"}
            families = {antihack.library_family(o) for o in ref_lib} - {None}
            if families & {"convolution", "attention"}:
                families.add("gemm")   # how those are computed too (im2col, a 1x1 filter, bmm)
            extra = sorted(op for op in ops if antihack.op_class(op) == "library"
                           and op not in ref_lib and antihack.library_family(op) not in families)
            if extra:
                found.append(("pytorch_fallback", "ran library ops of a kind the reference "
                              "never runs (KEPT_OPS may keep only the reference's): " + ", ".join(
                                  f"{op} x{ops[op]}" for op in extra[:6])))
        if not trace:
            return found
        if self.device.startswith("cuda"):
            extra = profile.unjoined_streams(trace, self.reference_trace())
            if extra:
                found.append(("side_stream", f"kernels on stream(s) {', '.join(extra)} were "
                              "never joined to the current stream"))
            strict = replaced is None or "*" in {antihack.norm(r) for r in replaced}
            hidden = profile.pytorch_kernels(trace) if strict and not kept else []
            if hidden:
                found.append(("pytorch_fallback", "PyTorch kernels ran outside the "
                              "dispatcher: " + ", ".join(hidden[:3])))
            inductor = [k for k in profile.kernel_names(trace) if k.startswith("triton_")
                        and k not in self.job["candidate_source"]]
            if inductor:
                found.append(("pytorch_fallback", "torch.compile's kernels ran: "
                              + ", ".join(sorted(set(inductor))[:3])))
            copies = profile.device_to_host(trace)
            if copies:
                found.append(("device_to_host", "the forward copied from the device to the "
                              "host: " + ", ".join(copies[:3])))
        # on the CPU Inductor's code is C++ called outside the dispatcher, no aten op and no
        # kernel event: its own mark on the trace is what shows torch.compile computed
        compiled = profile.compiled_graphs(trace)
        if compiled and not profile.compiled_graphs(self.reference_trace()):
            found.append(("pytorch_fallback", "torch.compile's compiled code ran: "
                          + ", ".join(compiled[:2])))
        own = own_kernels(self.job["candidate_source"])
        if own and (replaced is None or replaced) and not _launched(trace, own):
            found.append(("untraced_compute", "the profiler's trace of a checked call shows "
                          f"none of the candidate's own kernels ({', '.join(sorted(own)[:4])})"
                          " and no op computing what it replaces"))
        return found

    def claims(self, loaded: dict) -> tuple[list | None, list]:
        """What the candidate says it replaces (None: a candidate file, which says nothing)
        and keeps: the plan's, and the file's KEPT_OPS, which may name library ops only."""
        replaced = self.job.get("replaced")
        kept = list(self.job.get("kept") or []) + [str(k) for k in loaded.get("kept_ops", [])]
        if replaced is None:
            kept = [k for k in kept if antihack.op_class(k) == "library"]
        return replaced, kept

    def judge_samples(self, loaded: dict, flags: list) -> dict | None:
        """What the samples of its timed calls (sampler.py) say the candidate's threads did:
        compute in code the policy does not let it hand work to is a fallback. The report
        (None where nothing was sampled)."""
        if self.sampler is None or not self.sampler.stops:
            return None
        report = self.sampler.report()
        if not report["samples"] and not self.sampler.readable:
            flags.append("cpu_samples_unreadable")
            return None
        replaced, kept = self.claims(loaded)
        compute_ok, library_ok = antihack.foreign_work_allowed(
            replaced=replaced, kept=kept, reference_ops=profile.cpu_ops(self.reference_trace()))
        found = sampler.judge(report, compute_allowed=compute_ok, library_allowed=library_ok)
        if found:
            raise Reject("pytorch_fallback", found)
        return report

    def reference_trace(self) -> dict:
        if self.ref.trace is None:
            import torch
            xs = draw(self.ref.module, self.device, fresh_seed())
            path = str(self.state.workdir / "reference_trace.json")
            with torch.no_grad():
                profile.trace_to_file(lambda: self.ref.model(*xs), self.device, path)
            self.ref.trace = profile.read_trace(path)
        return self.ref.trace

    def profiles(self, checked: dict) -> dict:
        """What the Profile tab draws. With timing on, each side is the median (by span) of
        ``PROFILED_CALLS`` calls made the timed way (a flush, fresh inputs, no checks or NaN
        fills in the call), so the bars compare with the verdict's times; without it, the
        checked call's trace and the reference's."""
        from .. import trace as trace_mod
        from . import ncu
        if self.opts.time:
            ref = _median_span(self.reference_timed_traces())
            if len(self.timed_traces) < PROFILED_CALLS:
                self.timed_traces = self.candidate_timed_traces()
            cand = _median_span(self.timed_traces)
            protocol = {"timed": True, "calls": PROFILED_CALLS, "shown": "median span"}
        else:
            ref, cand = self.reference_trace(), checked
            protocol = {"timed": False, "calls": 1, "shown": "a checked call"}
        return {"reference": profile.rows(ref), "candidate": profile.rows(cand),
                "protocol": protocol,
                "kernels": trace_mod.kernel_summary(cand),
                "reference_kernels": trace_mod.kernel_summary(ref, top=10),
                "ncu": ncu.run(self.sandbox.folder / "problem.py",
                               self.sandbox.folder / "candidate.py",
                               seed=self.ref.weight_seed, enabled=self.opts.ncu,
                               device=self.device)}

    def candidate_timed_traces(self, n: int = PROFILED_CALLS) -> list[dict]:
        traces, seeds = [], []
        # one of them checked after all of them, as any timed call may be: picked before
        # they run, and only its copies kept (the judge's own doing, unseen by the sandbox),
        # so a large problem's five calls do not hold five calls' copies on the GPU. Checked
        # in rounds instead, the sandbox saw each round's end and which calls it asked for,
        # and knew the calls after the checked one safe
        checked = secrets.randbelow(n)
        with gpulock.exclusive(self.opts.gpu_lock, first=self.opts.first):
            for i in range(n):   # remote_call flushes, as for any timed call
                seeds.append(fresh_seed())
                self.remote_call(seeds[-1], trace=True, keep=i == checked)
                traces.append(self.read_trace(self.last_reply.get("trace")))
        self.checks_left = 1
        self.check_timed(seeds, 0, pick=[checked])
        return traces

    def reference_timed_traces(self) -> list[dict]:
        if self.ref.timed_traces is None:
            import torch
            timer = self.state.timer(self.opts.cpu_flush_mb)
            out = []
            with gpulock.exclusive(self.opts.gpu_lock, first=self.opts.first):
                for i in range(PROFILED_CALLS):   # flushed as local_call and Timer.call do
                    if not timer.cuda:
                        timer.flush()
                    xs = self.draw(fresh_seed())
                    if timer.cuda:
                        timer.flush()
                    path = str(self.state.workdir / f"reference_timed_trace_{i}.json")
                    with torch.no_grad():
                        profile.trace_to_file(_timed(timer, self.ref.model, xs), self.device,
                                              path, warm=True)
                    out.append(profile.read_trace(path))
            self.ref.timed_traces = out
        return self.ref.timed_traces

    # -- timing --
    def calls_per_round(self) -> int:
        """Timed calls between two checks: as many outputs as are kept meanwhile (CUDA: the
        judge's copies out of the arena, or the sandbox's where it has none; CPU: files)."""
        xs = self.draw(fresh_seed())
        # a round keeps each call's inputs and its outputs (CUDA: the judge's copies out of the
        # arena; CPU: files)
        per = sum(x.numel() * x.element_size() for x in xs if hasattr(x, "numel")) + max(
            self.out_bytes, self.ref.out_bytes) or 1
        budget = ROUND_BYTES["cuda" if self.device.startswith("cuda") else "cpu"]
        return max(1, min(MAX_SETS, budget // per, self.opts.timing_trials))

    def timed(self, call, end_round=None) -> dict[str, Any]:
        """Warm-ups, then calls until the trial floor and (CUDA) the time budget are met.

        ``call(seed) -> (ms, wall_ms, seen_ms)``: the contender's device and wall times, and the
        judge's own clock around the whole call (its inputs' draw included). After every
        ``calls_per_round()`` calls ``end_round(seeds)`` checks one of them."""
        for _ in range(max(1, self.opts.warmup)):
            if end_round is None:
                call(fresh_seed())
            else:   # the candidate's: never checked, so not kept
                call(fresh_seed(), keep=False)
        k = self.calls_per_round()
        if end_round is not None:
            end_round([], 0)
            self.wide_next, self.wide_round = secrets.randbelow(k), k   # some calls widened
        ms: list[float] = []
        walls: list[float] = []
        extra: list[float] = []
        seeds: list[int] = []
        seen_s: list[float] = []   # the judge's clock on every call, for when to sample
        sampled, sampled_s = 0, 0.0
        waited = 0
        watch = self.sampler if end_round is not None else None   # the candidate's calls only
        most = max(SAMPLED_CALLS_MIN, self.opts.timing_trials // 2)

        def more_samples() -> bool:
            if watch is None or not watch.readable or (
                    sampled >= 2 and sampled_s >= SAMPLE_TIME_S):
                return False
            if watch.working < SAMPLE_WORKING_LEAST and sampled < SAMPLED_CALLS_MAX \
                    and statistics.median(seen_s) >= SAMPLE_LANDS_S:
                return True   # too little seen computing to say who computed
            return sampled < most and watch.stops < SAMPLE_STOPS

        while True:
            seed = fresh_seed()
            stops = None
            if watch is not None and seen_s and (
                    (sampled < most and secrets.randbelow(SAMPLE_ONE_IN) == 0)
                    or (len(ms) >= self.opts.timing_trials and more_samples())):
                rng, est = secrets.SystemRandom(), statistics.median(seen_s)
                stops = sorted(rng.uniform(0.0, est) for _ in range(STOPS_PER_CALL))
                sampled += 1
            t, wall, seen = call(seed, stops) if stops else call(seed)
            seen_s.append(seen / 1e3)
            sampled_s += seen / 1e3 if stops else 0.0
            if seed in self.wide or stops:   # checked after the round (widened) or stopped
                seeds.append(seed)   # to be sampled: never timed (a kernel that checks its
                continue             # data may take a slower path on a widened draw)
            ms.append(t)
            walls.append(wall)
            extra.append(seen - t)
            seeds.append(seed)
            enough = len(ms) >= self.opts.timing_trials and not more_samples()
            if enough and end_round is not None and self.wide_way_due() \
                    and waited < WIDE_WAIT_CALLS:
                enough, waited = False, waited + 1   # a few calls more for the other way
            if self.device.startswith("cuda"):
                enough = enough and (sum(ms) >= TIME_BUDGET_MS or len(ms) >= MAX_TRIALS)
            done = enough or time.monotonic() > self.deadline - 5
            if end_round is not None and (len(seeds) >= k or done):
                left = 0 if done else self.calls_left(ms) // k
                end_round(seeds, left + 1)
                seeds = []
            if done:
                if watch is not None and more_samples():
                    # a candidate that spends the job's time elsewhere (a warm-up that sleeps)
                    # leaves its timed calls unwatched: the sampler is what sees whose code
                    # they run, and calls it could not see are not judged fast
                    raise Failed("timeout", "timeout", "the job's time ran out before the "
                                 f"candidate's timed calls were made and watched ({len(ms)} "
                                 f"timed, {watch.stops} of {SAMPLE_STOPS} sampling stops)")
                break
        return {"ms": statistics.median(ms), "wall_ms": statistics.median(walls),
                "least_extra_ms": min(extra),
                "least_seen_ms": min(m + e for m, e in zip(ms, extra)),
                "calls": list(zip(ms, extra))}

    def calls_left(self, ms: list[float]) -> int:
        """How many more timed calls ``timed`` will make, for spreading the checks over its
        rounds: up to the trial floor, and on CUDA until the time budget (counted in the
        reported times) or MAX_TRIALS. Not the budget on the CPU, where it ends no timing: a
        candidate reporting 0 ms made it 5000 rounds, so every round but the last checked one
        call, and one that skipped the work on 12 of its first round's 20 calls passed at 87x
        in one job in five (candidates/timed_calls_skipped_behind_a_zero_claim.py)."""
        left = self.opts.timing_trials - len(ms)
        if self.device.startswith("cuda"):
            per = max(statistics.median(ms), 1e-3)
            left = max(left, min(MAX_TRIALS - len(ms), int((TIME_BUDGET_MS - sum(ms)) / per)))
        return max(0, left)

    def baselines(self, flags: list, recheck: bool = False) -> dict[str, float]:
        """Eager and torch.compile, timed here with the same protocol, once per problem.

        ``recheck`` (CPU, once per job): eager is timed again first, and where it has moved
        by more than BASELINE_DRIFT since the baselines were timed (a host whose load changed
        over a session), all of them are timed again and the verdict says so: a speedup is a
        ratio of times taken under the same load, not of this job's against an earlier one's."""
        import torch
        key = (self.opts.compile_modes, self.opts.timing_trials, self.opts.warmup,
               self.opts.cpu_flush_mb)
        cached = self.ref.baselines.get(key)
        if cached is not None and recheck and not self.device.startswith("cuda"):
            timer = self.state.timer(self.opts.cpu_flush_mb)
            now = self.timed(lambda seed: self.local_call(timer, self.ref.model, seed))["ms"]
            was = cached["eager"]
            if was > 0 and abs(now / was - 1.0) > BASELINE_DRIFT:
                print(f"eager moved from {was:.3f} to {now:.3f} ms since the baselines were "
                      "timed: timing them again", file=sys.stderr)
                flags.append(f"{BASELINES_RETIMED}:eager {was:.3g}->{now:.3g} ms")
                cached = None
                self.ref.timed_traces = None   # the reference's profile, under this load too
        if cached is None:
            cached = {"_flags": []}
            timer = self.state.timer(self.opts.cpu_flush_mb)
            lock = self.opts.gpu_lock
            fns = {"eager": self.ref.model}
            for mode in self.opts.modes():   # compiled first, all of them: mostly host work,
                try:                          # while others may time and a spare starts up
                    fn = self.ref.compiled.get(mode)   # compiled once per problem
                    if fn is None:
                        fn = torch.compile(self.ref.model,
                                           mode=None if mode == "default" else mode)
                    with gpulock.shared(lock, first=True):   # a baseline: needed first
                        self.local_call(timer, fn, fresh_seed())
                    fns[mode] = self.ref.compiled[mode] = fn
                except Exception as e:  # noqa: BLE001  (a baseline that cannot compile is noted)
                    cached["_flags"].append(f"compile_failed:{mode}")
                    print(f"torch.compile mode={mode} failed: {e}", file=sys.stderr)
            if self.state.pool is not None:
                self.state.pool.settle()
            try:
                for mode, fn in fns.items():
                    try:
                        with gpulock.exclusive(lock, first=True):
                            res = self.timed(lambda seed, fn=fn: self.local_call(timer, fn, seed))
                    except Exception as e:  # noqa: BLE001
                        cached["_flags"].append(f"compile_failed:{mode}")
                        print(f"torch.compile mode={mode} failed: {e}", file=sys.stderr)
                        continue
                    name = "eager" if mode == "eager" else f"compile:{mode}"
                    cached[name], cached[f"{name}_wall"] = res["ms"], res["wall_ms"]
                    if mode == "eager" and self.opts.profile:
                        # the reference's profiled calls right after its timed ones, as the
                        # candidate's follow its own: the host as it was when the bars' numbers
                        # were measured (a CPU host's speed drifts over a job)
                        self.reference_timed_traces()
            finally:
                if self.device.startswith("cuda"):
                    # Timed once on CUDA, never again: what the compiled models hold is let go.
                    # reduce-overhead's CUDA graphs keep a private pool as large as the forward's
                    # inputs, intermediates and outputs (8 GB in a mean over an 8.6 GB input on
                    # the H100), which the candidate's checks then ran out of.
                    fns.clear()
                    self.ref.compiled.clear()
                    _forget_compiled()
            self.ref.baselines[key] = cached
        flags.extend(cached["_flags"])
        return {k: v for k, v in cached.items() if not k.startswith("_")}

    def confirm_load(self, eager_ms: float, flags: list) -> None:
        """CPU: eager called again right after the candidate's timed calls (the least of a
        few). Where it moved by more than BASELINE_DRIFT from the eager time this job's
        speedups divide, the host's load changed between the two (a spike while the baselines
        were timed again, gone by the candidate's turn: 11x for a 1.1x kernel): the ratio
        compares two loads, the verdict says so, and a session ranks it below steady ones."""
        timer = self.state.timer(self.opts.cpu_flush_mb)
        now = min(self.local_call(timer, self.ref.model, fresh_seed())[0]
                  for _ in range(LOAD_CHECK_CALLS))
        if eager_ms > 0 and abs(now / eager_ms - 1.0) > BASELINE_DRIFT:
            flags.append(f"{LOAD_CHANGED}:eager {eager_ms:.3g}->{now:.3g} ms")

    def local_call(self, timer, fn, seed: int) -> tuple[float, float, float]:
        import torch
        if not timer.cuda:
            timer.flush()
        t0 = time.perf_counter()
        xs = self.draw(seed)
        with torch.no_grad():
            ms, wall, out = timer.call(lambda: fn(*xs))
        seen = (time.perf_counter() - t0) * 1e3
        self.ref.out_sizes.add(sum(o.numel() * o.element_size() for o in tensors(out)))
        return ms, wall, seen

    def remote_call(self, seed: int, stops: list[float] | None = None, keep: bool = True,
                    **extra: Any) -> tuple[float, float, float]:
        """One timed call in the sandbox: (its device ms, its wall ms, the judge's clock).
        ``keep`` False (CUDA): its outputs are not copied out of the arena, for a call no
        check will pick (a warm-up, the calibration's, a profiled call other than the one
        picked up front): each copy holds a call's inputs and outputs on the GPU until the
        round ends, and three warm-ups of a 6 GB activation held 36 GB beside the
        candidate's process.

        The judge's clock runs from the command to the reply, the draw of the inputs included:
        work done while they are drawn (an answer computed ahead) is seen. On the CPU the
        judge draws them and hands them over (exchange.hand_over), so what the sandbox does
        before its forward is read a file, and the path stays short and steady."""
        handed = None
        if not self.device.startswith("cuda"):
            self.ask({"op": "prepare"})
            # the cache flushed from the judge's process, as before eager's calls: the
            # candidate's own process could keep its data warm by skipping a flush of its own
            # (candidates/flush_skipped_weights_warm.py)
            self.state.timer(self.opts.cpu_flush_mb).flush()
            how = self.next_wide(seed)
            handed = hand_over(widen(self.draw(seed), how, seed), self.sandbox.staging,
                               secrets.token_hex(8))
            if handed is None:   # drawn in the sandbox from the seed: not widened
                self.wide.pop(seed, None)
                self.no_hand_over = True
            elif seed in self.wide:
                self.wide_met.add((self.wide[seed], widens_few(seed)))
        t0 = time.perf_counter()
        try:
            handed = reveal(handed, self.sandbox.inputs)
            # the seed only where the sandbox draws the inputs itself: a widened draw's places
            # follow from it (exchange.widen), and a candidate that replays them computes
            # right there alone
            drawn = {"seed": seed} if handed is None else {}
            reply = self.ask(dict({"op": "call", "inputs": handed, "peek": self.peek,
                                   "rng": self.rng(seed)}, **drawn, **extra), stops)
            t0 += self.frozen_s   # the time it was stopped to be sampled is not its own
            # the clock stops at the reply, or (outputs read out of its memory) once the
            # candidate's process is frozen: the judge then takes the outputs as the call
            # left them, with nothing of the candidate running (Sandbox.frozen); a thread
            # that keeps the process from stopping keeps the clock running
            if self.peek:
                with self.sandbox.frozen():
                    seen = (time.perf_counter() - t0) * 1e3
                    self.pin(reply.get("outputs"))
            else:
                seen = (time.perf_counter() - t0) * 1e3
                if not self.device.startswith("cuda"):
                    self.pin(reply.get("outputs"))
                elif self.arena_mapped:
                    self.take(reply.get("arena"), keep)
        finally:
            for e in handed or []:
                if "path" in e:
                    os.unlink(e["path"])
        ms, wall = reply.get("ms"), reply.get("wall_ms")
        if not (isinstance(ms, (int, float)) and isinstance(wall, (int, float))
                and 0 <= ms < 1e9 and 0 <= wall < 1e9):
            raise Reject("protocol_tampering", "a timing reply without its times")
        return float(ms), float(wall), seen

    def vet(self, how: str, way: bool) -> None:
        """``how`` scaling ``way`` (a few places or not) suits the reference: a timed call's
        widened draw may take it (``next_wide``)."""
        if (how, way) not in self.wide_vetted:
            self.wide_vetted.append((how, way))

    def next_wide(self, seed: int) -> str | None:
        """Whether this timed call gets inputs outside get_inputs()'s range (how, or None).

        The judge hands the CPU's timed calls their inputs, so a widened draw looks like any
        other: every so many calls (at places drawn here), one is, and it is always checked.
        A candidate that computes right only on get_inputs()'s range when it is not in a
        checked trial (which it can tell: deterministic mode) is then caught as well. Each
        vetted widening is met in turn (the seed decides the way: a widening of the other way
        waits for a seed that scales so), then any at random."""
        if self.wide_next is None or not self.wide_vetted:
            return None
        if self.wide_next > 0:
            self.wide_next -= 1
            return None
        way = widens_few(seed)
        fits = [v for v in self.wide_vetted if v[1] == way]
        if not fits:
            return None   # only a way the range trials vetted: the next seed that scales so
        unmet = [v for v in fits if v not in self.wide_met]
        if not unmet and self.wide_way_due():
            return None   # this way's all met: the next call whose seed scales the other way
        how = (unmet or fits)[secrets.randbelow(len(unmet or fits))][0]
        # one still to meet comes at the next call whose seed suits (half of them): a
        # countdown of up to two rounds (40 calls) outran the few calls a timing waits for it
        left = set(self.wide_vetted) - self.wide_met - {(how, way)}
        self.wide_next = 0 if left else 1 + secrets.randbelow(2 * self.wide_round)
        self.wide[seed] = how
        return how

    def wide_way_due(self) -> bool:
        """CPU: a vetted widening (``vet``) has not had a timed call yet (``next_wide``)."""
        return (not self.device.startswith("cuda") and not self.no_hand_over
                and bool(set(self.wide_vetted) - self.wide_met))

    def time_candidate(self, traced: dict, calibration: Calibration) -> dict[str, float]:
        """The candidate's timed calls, some checked after the fact, and the clocks."""
        self.checks_left = CHECKED_CALLS
        res = self.timed(self.remote_call, self.check_timed)
        reported = res["ms"]
        kind = "cuda" if self.device.startswith("cuda") else "cpu"
        # the path's own spread grows with its length: half of it is allowed on top (its
        # whole median here: a busy calibration must not call an honest timer a liar; the
        # verdict's time, counted_ms, believes less of it)
        allowed = max(CLOCK_SHARE[kind] * reported,
                      CLOCK_SLACK_MS[kind] + CLOCK_PATH_SHARE * calibration.median)
        excess = res["least_extra_ms"] - calibration.least
        rounds, t0 = 1, time.monotonic()
        for wait in (0.0,) * CLOCK_CONFIRM_ROUNDS + CLOCK_RETRY_WAITS_S:
            # the waits only while the job has time for them and the rounds after them: a
            # verdict at the deadline would be a timeout, not the disagreement it is
            near_end = self.deadline - time.monotonic() < 10 * wait + 10
            if excess <= allowed or (wait and near_end):
                break
            time.sleep(wait)
            excess = min(excess, self.least_disagreement() - calibration.least)
            rounds += 1
        if excess > allowed:
            raise Reject("patched_timer", f"the judge's clock saw {excess:.3f} ms per call "
                         f"more than the candidate's timer reported ({reported:.3f} ms), on "
                         f"the quietest of {rounds} rounds of calls over "
                         f"{time.monotonic() - t0:.0f} s, beyond what the same path took on "
                         f"the reference ({calibration.least:.3f} ms)")
        # what the judge's clock says the quietest call took, the path's least cost taken off:
        # a timer that reports less than this is not believed (the verdict uses the larger).
        # The quietest, not the median: load on the host lengthens the path (messages, the
        # draw) in some calls, and must not make an honest candidate slower than its timer.
        # And call by call (judged_ms): a lie on most calls is not hidden by one call that
        # tells the truth or returns at once
        if rounds > 1:
            # the disagreement passed in a later round: the load that made it lengthened the
            # timed calls too, and the time counted from them would be the load's. The calls
            # timed again count instead (not the lesser of the two: a red team's timer that
            # lied in both timings got the better of two draws of the noise); either count is
            # the judge's clock less the path and its allowance, so a lie claims nothing
            self.checks_left = CHECKED_CALLS
            res = self.timed(self.remote_call, self.check_timed)
        ours = counted_ms(res["ms"], res, calibration, kind)
        trace = traced.get("trace")
        if trace is not None:
            if kind == "cuda":
                # calls made the timed way, under the profiler, one of them checked: a checked
                # call runs in deterministic mode, whose cuDNN convolutions may take longer
                # than the timed calls' (seen: 9.4 ms traced against an honest 5.8 ms timed)
                self.timed_traces = self.candidate_timed_traces(
                    PROFILED_CALLS if self.opts.profile else 1)
                dev = statistics.median(profile.device_ms(t) for t in self.timed_traces)
            else:
                dev = profile.device_ms(trace)
            if dev > DEVICE_SLACK * ours + CLOCK_SLACK_MS[kind]:
                raise Reject("patched_timer", f"the device trace shows {dev:.3f} ms of kernels "
                             f"per call (the median of its profiled timed calls on CUDA); the "
                             f"candidate's timer reported {ours:.3f} ms")
        return {"ours": ours, "ours_wall": res["wall_ms"]}

    def least_disagreement(self) -> float:
        """A fresh round of the candidate's timed calls, one of them checked after it: the
        least (judge's clock - sandbox's timer) among them."""
        seeds, extra = [], []
        for _ in range(self.calls_per_round()):
            seeds.append(fresh_seed())
            ms, _, seen = self.remote_call(seeds[-1])
            extra.append(seen - ms)
        self.checks_left = 1
        self.check_timed(seeds, 0)
        return min(extra)

    def check_timed(self, seeds: list[int], rounds_left: int,
                    pick: list[int] | None = None) -> None:
        """Some of the round's calls, picked now, compared with the reference: CHECKED_CALLS
        of each contender's timed calls in all (all of them when there are fewer), spread over
        the rounds, which ones decided only after each round. ``pick``: the plain calls to
        check, decided before the round (the only ones the judge kept)."""
        import math

        import torch
        n = 0
        wide = [i for i, sd in enumerate(seeds) if sd in self.wide]
        plain = [i for i in range(len(seeds)) if i not in wide]
        # the last round (rounds_left 1, or 0 for a round alone) checks one even with the
        # CHECKED_CALLS spent: a candidate that counted them would know the calls after the
        # last safe, and the judge ends the calls when it alone decides
        if plain and (self.checks_left > 0 or rounds_left <= 1):
            n = min(len(plain), max(1, math.ceil(self.checks_left / max(1, rounds_left))))
        chosen = [i for i in pick if i in plain][:n] if pick is not None else (
            secrets.SystemRandom().sample(plain, n) if n else [])
        n = len(chosen)
        picked_calls = sorted(wide + chosen)
        picked = self.end_round(picked_calls)
        self.checks_left = max(0, self.checks_left - n)
        try:
            # the plain draws first: a program wrong on every call is timed_output_mismatch,
            # input_range is one wrong only outside get_inputs()'s range
            plain_ok = 0   # plain calls of this round found right
            for i in sorted(picked_calls, key=lambda i: seeds[i] in self.wide):
                how = self.wide.get(seeds[i])
                xs = widen(self.draw(seeds[i]), how, seeds[i])
                self.check_timed_inputs(i, xs, picked.get(str(i)))
                if isinstance(self.round_inputs, dict):   # checked: its copy goes before the
                    self.release(self.round_inputs.get(str(i)))   # reference's forward
                with torch.no_grad():
                    ref_out = [r.detach() for r in
                               tensors(self.reference(self.ref.model, xs, seeds[i]))]
                del xs
                lost = non_finite(ref_out) if how is not None else 0
                if lost and lost > non_finite(self.plain_outputs(seeds[i])):
                    continue   # this draw takes the reference past what its trial vetted
                got, res = self.read(picked.get(str(i)), ref_out, self.truth(seeds[i], how),
                                     far=how is None)
                if got is not None and all(r["ok"] for r in res):
                    plain_ok += how is None
                    continue
                why = "; ".join(f"{r['reason']}: {r['msg']}" for r in res if not r["ok"])
                if how is None:
                    raise Reject("timed_output_mismatch", "a timed call's output, checked "
                                 f"after the round, is wrong ({why or 'missing'}): the "
                                 "candidate computes differently when it is timed")
                detail = (f"a timed call on a draw of get_inputs() {widened_how(how, seeds[i])} "
                          "(outside the range it draws from), checked after the round, is "
                          f"wrong ({why or 'missing'})")
                if not plain_ok:
                    raise Reject("timed_output_mismatch", detail)
                # wrong only outside the range where plain calls of the round were right: the
                # same verdict as a widened trial's (which of the two meets it first is chance)
                raise Failed("incorrect", "input_range", detail)
        finally:
            self.release(list(picked.values()))
            if isinstance(self.round_inputs, dict):   # the arena's copies (CUDA)
                self.release(list(self.round_inputs.values()))

    def check_timed_inputs(self, i: int, xs: list, outs: Any = None) -> None:
        """A picked timed call's inputs, as the call left them in the candidate's process,
        against the judge's own draw of them: a forward may not change its inputs in any call
        (the checked trials look too, but a timed call can be told from a checked one).
        ``outs``: the call's outputs as the judge took them (an arena too small for a draw's
        inputs is believed only where the outputs placed before them leave no room)."""
        import torch
        want = [x for x in xs if isinstance(x, torch.Tensor)]
        entries = self.round_inputs.get(str(i)) if isinstance(self.round_inputs, dict) \
            else None
        if not isinstance(entries, list) or len(entries) != len(want):
            raise Reject("protocol_tampering", "the candidate's process did not give back the "
                         "inputs of a timed call the judge checks")
        at = size_for([p.host.numel() for p in outs or []   # where put() began the inputs
                       if getattr(p, "host", None) is not None])
        for k, (entry, x) in enumerate(zip(entries, want)):
            n = x.numel() * x.element_size()
            if self.arena_full(entry, at, n):
                continue
            at += size_for([n])
            got = read_output(entry, x, str(self.box.outputs) if self.box else None)
            if isinstance(got, str):
                raise Reject("protocol_tampering", f"a timed call's input {k}: {got}")
            if not same(got, x):
                raise Reject("input_mutation", f"a timed call changed its input {k} (found "
                             "after the round, against the judge's own draw of it)")

    def arena_full(self, entry: Any, at: int, n: int) -> bool:
        """Whether an input the sandbox says did not fit in the arena truly could not: placed
        where ``put`` would have put it (``at``, after the outputs and the inputs before it),
        its ``n`` bytes run past the arena."""
        if not (self.arena_mapped and self.arena is not None
                and getattr(entry, "error", "").startswith("output_count:")):
            return False
        if at + n <= self.arena.nbytes:
            raise Reject("protocol_tampering", "a timed call's input said not to fit in the "
                         f"arena, where {n} bytes at {at} fit in its {self.arena.nbytes}")
        print(f"a timed call's input of {n} bytes outgrew the arena ({self.arena.nbytes} "
              "bytes): not compared", file=sys.stderr)
        return True

    def pin(self, entries: Any) -> None:
        """CPU: a timed call's outputs, read out of the frozen sandbox (exchange.peek_output),
        or its output files pinned (exchange.pin_output) before the judge's clock stops. Only what they held then is checked: the sandbox (the candidate's
        process) could otherwise compute a call's outputs once the check asks for them, after
        the call and outside every clock."""
        from .exchange import in_file_mapping, peek_output, pin_output
        if not isinstance(entries, list):
            entries = [None]
        # what one call's outputs may claim of the judge's memory, all of them together
        left = 4 * max(self.out_bytes, self.ref.out_bytes) + (64 << 20)

        def one(e: Any) -> Pinned:
            nonlocal left
            if e is None:
                return Pinned([], "", "protocol: a timed call's reply without its outputs")
            if self.peek:
                got = peek_output(self.sandbox.proc.pid, e, left)
                left -= got.nbytes
                return got
            return pin_output(e, str(self.sandbox.outputs))
        if self.peek and len(entries) > MAX_OUTPUTS:
            entries = [None]
        if self.peek:
            mapped = in_file_mapping(self.sandbox.proc.pid, entries)
            if mapped:
                raise Reject("output_aliasing", "a timed call's output lies in a mapping of "
                             f"the file {mapped[:200]}: not memory of its own (a file the "
                             "harness reads or writes, mapped by the candidate, carries bytes "
                             "that no timer sees moved)")
        self.pinned.append([one(e) for e in entries])

    def take(self, placed: Any, keep: bool = True) -> None:
        """CUDA: a timed call's outputs and inputs, copied out of the arena as it answered;
        not ``keep``: a place held for them (the round's calls keep their indices), which no
        check may pick."""
        why = ("protocol: the judge did not keep this call" if not keep else
               None if isinstance(placed, list) and len(placed) == 2 else
               "protocol: a timed call's reply without its arena entries")
        if why is not None:   # the call's place in the round, holding nothing a check can read
            held = [Pinned([], "", why)]
            self.pinned.append(held)
            self.pinned_inputs.append(held)
            return
        assert self.arena is not None
        self.pinned.append(self.arena.take(placed[0]))
        self.pinned_inputs.append(self.arena.take(placed[1]))

    def end_round(self, calls: list[int]) -> dict:
        """The round's picked calls' outputs (``calls``: indices of its timed calls), by index:
        those taken as they answered (CPU: files pinned or memory read; CUDA: the arena), the
        others let go; on CUDA without an arena the sandbox writes them now. With the arena
        the judge holds every copy it checks, and the sandbox is not told which: knowing how
        many checks it had seen, a candidate knew when the rest of the calls were safe."""
        reply = self.ask({"op": "outputs", "calls": [] if self.arena_mapped else calls})
        picked = reply.get("picked", {})
        self.round_inputs = reply.get("inputs")
        if not self.device.startswith("cuda") or self.arena_mapped:
            done, self.pinned = self.pinned, []
            ins, self.pinned_inputs = self.pinned_inputs, []
            picked = {str(i): done[i] for i in calls if i < len(done)}
            if self.arena_mapped:
                self.round_inputs = {str(i): ins[i] for i in calls if i < len(ins)}
            self.release([f for i, files in enumerate(done) if i not in calls for f in files])
            self.release([f for i, files in enumerate(ins) if i not in calls for f in files])
        return picked

    def release(self, pinned: Any) -> None:
        """Close (and remove) pinned output files: a list of them, or a list of lists."""
        for p in pinned or []:
            if isinstance(p, list):
                self.release(p)
            elif hasattr(p, "close"):
                p.close()

    def check_processes(self, ticks: int) -> None:
        strays = self.sandbox.strays()
        if strays:
            raise Reject("subprocess", f"the candidate left processes running (pid "
                         f"{', '.join(map(str, strays[:4]))})")
        if self.sandbox.child_cpu_ticks() > ticks:
            raise Reject("subprocess", "child processes of the candidate ran during the "
                         "checked or timed calls")


# the parts of a trial the sandbox reports (``Sandbox.trial``; ``Job.sandbox_split``)
SANDBOX_PARTS = ("release", "inputs", "poison", "call", "traced_call", "checks", "send",
                 "second")


# --- entry points ----------------------------------------------------------------------------

def run_verify(job: dict, state: WorkerState) -> dict:
    """One candidate against one problem; returns {"verdict": dict, "healthy": True}."""
    timeout = float(job.get("timeout", 300.0))
    j = Job(job, state, time.monotonic() + timeout)
    # A shared GPU (gpulock.py) is this job's alone from before the candidate's process gets
    # its candidate until that process is gone: no candidate runs beside another's timing.
    held = contextlib.ExitStack()
    try:
        if j.opts.time:
            j.baselines([])   # cached after the first job; its compiling shares the GPU
        # a spare holds nothing of a candidate: waiting for one to start (seconds on a GPU
        # host) must not hold a shared GPU from the jobs of other problems
        j.take_sandbox()
        held.enter_context(gpulock.exclusive(j.opts.gpu_lock, first=j.opts.first))
        return {"verdict": Verdict(**j.run()).to_dict(), "healthy": True}
    except Reject as r:
        return {"verdict": _status("rejected", r.name, r.detail, **j.base), "healthy": True}
    except Failed as f:
        return {"verdict": _status(f.status, f.name, f.detail, build_log=f.log, **j.base),
                "healthy": _device_healthy(state.device)}
    finally:
        j.release(j.pinned)
        j.release(j.pinned_inputs)
        if j.box is not None:
            j.box.destroy()
        j.free_arena()
        held.close()
        if state.pool is not None:
            state.pool.fill()   # the next candidate's process starts now, between jobs


def run_baseline(job: dict, state: WorkerState) -> dict:
    j = Job(dict(job, candidate_source=""), state, time.monotonic() + 600)
    state.spares()   # the first candidate's process starts while the baselines compile
    return {"timings": j.baselines([]), "healthy": True}


def _out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is running out of memory, whichever way it is said (torch's
    OutOfMemoryError, the CPU allocator's RuntimeError, a draw's ``Failed``)."""
    from .failures import classify_exception
    if isinstance(e, Failed):
        return e.name == "out_of_memory"
    return classify_exception(e)[0] == "out_of_memory"


def quietest_ms(reported: float, least_seen: float, calibration: Calibration,
                kind: str) -> float:
    """What the judge's clock says the quietest call took (``least_seen``), less the path's
    least cost, where that exceeds the candidate's ``reported`` time by more than the path's
    own spread (and a quarter of the clock's slack); else ``reported``.

    On a busy 2-core host an honest 0.3 ms kernel whose quietest call came 0.3 ms over the
    calibration's was timed at twice its time and lost to eager. A lie within the spread
    gains nothing ``judged_ms`` does not allow already."""
    seen = least_seen - calibration.path
    spread = max(calibration.steady_median - calibration.least,
                 CLOCK_SLACK_MS[kind] * SEEN_SLACK_SHARE)
    return seen if seen - reported > spread else reported


def _shuffled(ways: tuple[str, ...]) -> tuple[str, ...]:
    """``ways`` in an order drawn here."""
    order = list(ways)
    secrets.SystemRandom().shuffle(order)
    return tuple(order)


def counted_ms(reported: float, res: dict, calibration: Calibration, kind: str) -> float:
    """The verdict's time of a candidate's timed calls (``res``: ``timed``'s clocks): the
    larger of ``quietest_ms`` and ``judged_ms``."""
    allowance = CLOCK_SLACK_MS[kind] + CLOCK_PATH_SHARE * calibration.steady_median
    return max(quietest_ms(reported, res["least_seen_ms"], calibration, kind),
               judged_ms(res["calls"], calibration.path, allowance))


def judged_ms(calls: list[tuple[float, float]], path: float, allowance: float) -> float:
    """The median over timed calls of the larger of what the candidate's timer reported and
    what the judge's clock saw, less the path's least cost (``path``) and the allowance for
    its spread. ``calls``: (reported ms, the judge's clock less that) per call.

    Per call, not the quietest call against the median report: where calls differ in size (a
    row count drawn per call), a timer that reports, for every call, the least time any call
    has taken is true on the quickest calls, which are also the judge's quietest; and one
    call that returns at once (unchecked, with luck) is the quietest of all. Load on the host
    in some calls moves the median by nothing."""
    return statistics.median(max(m, m + e - path - allowance) for m, e in calls)


def own_kernels(source: str) -> set[str]:
    """Names of the kernels a candidate's source defines (CUDA ``__global__`` functions, C
    functions it exports, Triton ``@triton.jit`` functions)."""
    names = set()
    for head in re.findall(r"__global__([^{;]*)", source):
        name = _kernel_name(head)
        if name:
            names.add(name)
    names |= set(re.findall(r"@triton\.jit[^\n]*\n\s*def\s+(\w+)", source))
    return names


def _kernel_name(head: str) -> str | None:
    """The name in a kernel's head (what follows ``__global__``): the word before its
    parameter list, the last parenthesised group at the top level. Attributes with
    arguments may stand before it, before or after the return type
    (``__launch_bounds__(256)``, ``__cluster_dims__(8, 1, 1)``, a macro for either), and a
    GCC ``__attribute__((...))`` after it."""
    head = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", head, flags=re.S)
    depth, last = 0, None
    for i, ch in enumerate(head):
        if ch == "(":
            last = i if depth == 0 else last
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    found = re.search(r"(\w+)\s*$", head[:last]) if last is not None else None
    return found.group(1) if found else None


def _launched(trace: dict, own: set[str]) -> bool:
    names = profile.kernel_names(trace) + [str(e.get("name", "")) for e in
                                           profile.trace_mod.load(trace)]
    return any(any(o in n for o in own) for n in names)


def _timed(timer: Any, fn: Any, xs: list) -> Any:
    """``timer.call`` of ``fn(*xs)`` as a function of nothing, the flush already done."""
    return lambda: timer.call(lambda: fn(*xs), flush=False)


def _median_span(traces: list[dict]) -> dict:
    """The trace whose forward's length (as the Profile tab measures it, ``figures.agreement``)
    is the median of ``traces`` (the middle one)."""
    from ..trace import span_us, timed_window_us

    def length(t: dict) -> float:
        rows = profile.rows(t)
        return timed_window_us(rows) or span_us(rows)
    return sorted(traces, key=length)[len(traces) // 2]


def _by_name(ops: dict) -> dict:
    """Op counts keyed by short name: the dispatcher's "aten.add.Tensor" and the profiler's
    "aten::add" are one op."""
    out: dict[str, int] = {}
    for k, v in ops.items():
        out[antihack.norm(k)] = out.get(antihack.norm(k), 0) + int(v)
    return out


def _merge(a: dict, b: Any) -> dict:
    out = dict(a)
    if isinstance(b, dict):
        for k, v in b.items():
            if isinstance(v, int):
                out[str(k)] = out.get(str(k), 0) + v
    return out


def _speedups(result: dict) -> None:
    timings, flags = result["timings"], result["flags"]
    ours = timings.get("ours")
    if not ours or ours <= 0:
        return
    if "eager" in timings:
        result["speedup_vs_eager"] = timings["eager"] / ours
    comp = timings.get("compile:default") or min(
        (v for k, v in timings.items() if k.startswith("compile:") and not k.endswith("_wall")),
        default=None)
    if comp:
        result["speedup_vs_compile"] = comp / ours
    if max(result.get("speedup_vs_eager") or 0, result.get("speedup_vs_compile") or 0) > 10:
        flags.append("speedup_over_10x")


def _memory_limit(device: str) -> str:
    if device.startswith("cuda"):
        import torch
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        return f"the GPU has {total / 2 ** 30:.2f} GiB"
    import resource
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return "no address-space limit"
    return f"the worker's limit is {soft / 2 ** 30:.2f} GiB"


def _limits(device: str) -> dict[str, int]:
    """Resource caps for a candidate's process: no core dumps, files of at most 16 GiB, at most
    1024 tasks of its user, no POSIX message queue, and on
    the CPU an address space of 60% of the memory (at least 4 GiB), so that a runaway
    allocation fails fast (MemoryError) instead of swapping the machine."""
    import os
    # processes and threads of the candidate's own user (enforced when it has one): a fork bomb
    # stops there
    # POSIX message queues outlive every process and cannot be listed without their file
    # system mounted: a candidate gets none (RLIMIT_MSGQUEUE 0)
    limits = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": 16 << 30, "RLIMIT_NPROC": 1024,
              "RLIMIT_MSGQUEUE": 0}
    if not device.startswith("cuda"):
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]   # the judge's own cap, when it has one
        if soft != resource.RLIM_INFINITY:
            limits["RLIMIT_AS"] = soft
        else:
            try:
                total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                limits["RLIMIT_AS"] = max(int(total * 0.6), 4 << 30)
            except (ValueError, OSError):
                pass
    return limits


def _status(status: str, name: str, detail: str = "", **kw: Any) -> dict:
    reason = f"{name}: {detail}" if detail else name
    return Verdict(status=status, reason=reason, **kw).to_dict()


def _device_healthy(device: str) -> bool:
    if not device.startswith("cuda"):
        return True
    try:
        import torch
        torch.cuda.synchronize()
        (torch.ones(1, device=device) + 1).item()
        return True
    except Exception:  # noqa: BLE001
        return False
