"""Session: drives the loop with the agents, the Verifier and the store (what CLI and notebook use).

Every event is written to the session log before the state moves on, so a session killed at
any point reopens with ``Session.open`` (replaying its events) and carries on from there.

``Session.create`` is the one way in (the CLI, the ``%%stitch`` magic and the bench all call
it): settings checked, problem loaded, device chosen, agents made, problem validated, graph
analysed, and only then the session folder written.

Example (runs the model, so not a doctest)::

    s = Session.create("examples/mlp.py", Settings())      # or a Problem
    s.advance()                   # plans, then stops: the plan needs a person's approval
    s.post(PlanApproved()); s.advance()
    s.advance(auto=True)          # or run everything without stops
    s.best(), s.model(), s.export("out/")
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agents import rubric
from .errors import (
    BudgetExceeded,
    ConfigError,
    InvalidEvent,
    ReplyError,
    StitchError,
    StoreError,
)
from .graph import Graph, analyse
from .loop import (
    EVENTS,
    AttemptFailed,
    CandidateApproved,
    CandidatesProposed,
    Event,
    Finished,
    NextIteration,
    PlanApproved,
    PlanProposed,
    Regenerate,
    State,
    VerdictReady,
    event_from_payload,
    step,
)
from .candidate import Candidate
from .record import Shown
from .verdict import Verdict, load_changed
from . import gpulock
from .problem import Problem, ProblemReport, _user_error, load_problem, validate
from .settings import Settings
from .spend import Spend
from .store import SessionLog, SessionStore, StoreWarning
from .verifier.options import VerifyOptions
from .verifier.worker import WorkerHandle, resolve_device

if TYPE_CHECKING:
    import torch

    from .agents.base import Coder, Planner
    from .agents.rubric import Reviewer

ProgressFn = Callable[[str, "float | None"], None]
NOISE = 0.02          # a refine iteration must beat the best so far by 2% to keep going
MAX_BLOCKERS = 3     # ops named in a kept-reference reason (the rest are in the plan)
# how candidates are judged: a reopened session keeps the values it was created with
# (verdicts before and after a restart compare like with like), whatever the reopening
# kernel's settings say; what it may spend and how long a job may take are the reopener's
RECORDED_SETTINGS = ("trials", "timing_trials", "warmup", "atol", "rtol", "seed",
                     "compile_modes", "profile", "tensor_cores")
# the Session object that drives each session folder in this process: a second open of the
# folder supersedes the first (two objects posting to one log would interleave their events)
_DRIVERS: dict[Path, weakref.ref] = {}
# A candidate's build time beyond which its iteration's candidates build side by side first
# (verifier/prebuild.py): that phase costs about 0.2 s a candidate (a process, the problem,
# the import), measured on a 2-core CPU host (benchmarks/prebuild.py)
PREBUILD_MIN_MS = 1000.0


class Session(Shown):
    """One optimisation of one problem on one device, backed by a session folder."""

    def __init__(self, log: SessionLog, problem: Problem, settings: Settings, *, agent: str,
                 device: str, state: State | None = None, graph: Graph | None = None,
                 planner: Planner | None = None, coder: Coder | None = None,
                 worker: WorkerHandle | None = None, on_progress: ProgressFn | None = None):
        self.log = log
        self.problem = problem
        self.settings = settings
        self.agent = agent
        self.device = device
        self.state = state or State()
        self.graph = graph
        self.on_progress = on_progress
        self._planner, self._coder, self._worker = planner, coder, worker
        self._recorders_attached = False
        self.readonly = False
        self.superseded = ""     # why this object no longer drives its session, if it does not
        self.report: ProblemReport | None = None    # what validation saw (Session.create)
        self._spend: Spend | None = None
        self._facts: dict[str, Any] | None = None
        self._paused: str | None = None     # why the last advance stopped short, if it did

    # ------------------------------------------------------------------ construction
    @property
    def id(self) -> str:
        return self.log.id

    @property
    def dir(self) -> Path:
        return self.log.dir

    @classmethod
    def create(cls, problem: Problem | str | os.PathLike, settings: Settings | None = None,
               agent: str | None = None, *, device: str | None = None, isolate: bool = False,
               time_forward: bool = False, planner: Planner | None = None,
               coder: Coder | None = None, worker: WorkerHandle | None = None,
               graph: Graph | None = None,
               on_progress: ProgressFn | None = None,
               on_validated: Callable[[ProblemReport], Any] | None = None) -> Session:
        """A new session for ``problem`` (a Problem, or a problem file's path).

        In order: the settings are checked, the problem loaded, the device chosen, the agents
        made (a missing API key stops here), the problem validated and its graph analysed; the
        session folder is written last, so a user's mistake leaves none behind. Validation
        runs in this process, or with ``isolate`` in a fresh one killed after
        ``settings.timeout`` (a file that loops forever at import); ``time_forward`` also
        times the eager forward. ``session.report`` holds what validation saw.

        ``planner``, ``coder`` and ``worker`` replace the agents and the Verifier's worker
        (tests, custom agents); by default they come from ``agent`` (``settings.agent``).
        ``on_validated(report)`` is called once the problem has passed validation, before its
        graph is analysed (the bench starts the Verifier's baselines then).
        """
        settings = settings or Settings.from_env()
        agent = agent or settings.agent
        if settings.iters < 0:
            raise ConfigError(f"iters must be 0 or more, got {settings.iters}",
                              hint="refine iterations after the first candidate: --iters, "
                                   "STITCH_ITERS or Settings.iters")
        if not isinstance(problem, Problem):
            problem = load_problem(problem)
        device = resolve_device(device or settings.device)
        if planner is None or coder is None:
            from .agents.base import get_agents
            made = get_agents(agent, settings)
            planner, coder = planner or made[0], coder or made[1]
        if on_progress is not None:
            on_progress(f"validating {problem.origin} on {device}", None)
        with gpulock.shared(settings.gpu_lock, first=True):   # not timed: may overlap others'
            report = validate(problem, device=device, seed=settings.seed,
                              timeout=settings.timeout if isolate else None,
                              time_forward=time_forward)
            if on_validated is not None:
                on_validated(report)
            if graph is None:   # before the folder, so a broken problem leaves none behind
                if on_progress is not None:
                    on_progress("analysing the model's graph", 0.0)
                graph = _analyse(problem, device, settings)
        gpulock.release_cached_memory(device)   # the Verifier's processes need it
        store = SessionStore(settings.sessions_dir)
        log = store.create({"problem": problem.name, "origin": problem.origin, "device": device,
                            "agent": agent, "iters": settings.iters,
                            "problem_sha256": problem.digest()})
        log.append("session_created", {
            "problem": {"name": problem.name, "source": problem.source,
                        "origin": problem.origin, "notes": problem.notes},
            "device": device, "agent": agent, "settings": settings.public_dict()})
        s = cls(log, problem, settings, agent=agent, device=device, graph=graph,
                planner=planner, coder=coder, worker=worker, on_progress=on_progress)
        s.report = report
        log.append("graph", {"graph": graph.to_dict()})
        s._drive()
        return s

    @classmethod
    def open(cls, session: str | os.PathLike, settings: Settings | None = None, *,
             iters: int | None = None, planner: Planner | None = None,
             coder: Coder | None = None, worker: WorkerHandle | None = None,
             on_progress: ProgressFn | None = None,
             lock: bool = True) -> Session:
        """Reopen a session (also one interrupted by a crash) by replaying its events.

        ``iters`` overrides the number of refine iterations the session was created with;
        ``lock=False`` opens a read-only view (listing, export) that leaves the lock alone.
        """
        settings = settings or Settings.from_env()
        log = SessionStore(settings.sessions_dir).open(session)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StoreWarning)
            records = log.records()
        for w in caught:
            _warn(str(w.message))
        created = next((r for r in records if r.kind == "session_created"), None)
        if created is None:
            raise StoreError(f"session {log.id} has no session_created event",
                             hint="the folder is not a stitchcuda-lab session or is damaged")
        p = created.payload["problem"]
        problem = Problem(name=p["name"], source=p["source"], origin=p["origin"],
                          notes=list(p.get("notes", [])))
        recorded = created.payload.get("settings", {})
        settings = settings.replace(iters=iters if iters is not None
                                    else recorded.get("iters", settings.iters),
                                    **{k: recorded[k] for k in RECORDED_SETTINGS
                                       if k in recorded})
        graph = None
        state = State()
        for r in records:
            if r.kind == "graph" and r.payload.get("graph"):
                graph = Graph.from_dict(r.payload["graph"])
            elif r.kind in EVENTS:
                try:
                    state = step(state, event_from_payload(r.kind, r.payload))
                except InvalidEvent as e:   # a damaged log: keep what replays cleanly
                    _warn(f"session {log.id}: stopped replay at event {r.seq}: {e.message}")
                    break
        if lock:
            log.acquire()
            log.update_meta(status="running")
        s = cls(log, problem, settings, agent=created.payload["agent"],
                device=created.payload["device"], state=state, graph=graph,
                planner=planner, coder=coder, worker=worker, on_progress=on_progress)
        s.readonly = not lock
        if lock:
            s._drive()
        return s

    def _drive(self) -> None:
        """Make this object the one that drives its folder in this process; an earlier one
        stops posting (its panel says why) and leaves the lock to this one."""
        key = self.dir.resolve()
        ref = _DRIVERS.get(key)
        prev = ref() if ref is not None else None
        if prev is not None and prev is not self and not prev.readonly:
            prev.readonly = True
            prev.superseded = (f"session {self.id} was opened again in this process: this "
                               "Session object (and its panel) no longer drives it")
        _DRIVERS[key] = weakref.ref(self)

    # ------------------------------------------------------------------ events
    def post(self, event: Event) -> State:
        """Apply one event: checked by the loop, written to the log, then taken as the state."""
        self._writable("change it")
        new = step(self.state, event)
        self.log.append(event.kind, event.payload())
        self.state = new
        return new

    def _writable(self, to: str) -> None:
        if self.superseded:
            raise InvalidEvent(self.superseded,
                               hint="use the Session (and the panel) the newer open returned")
        if self.readonly:
            raise InvalidEvent(f"session {self.id} was opened read-only",
                               hint=f"open it with Session.open(..., lock=True) to {to}")

    def drafts(self) -> dict[str, dict[str, str]]:
        """Kernel text a person typed and has neither verified nor discarded, by candidate id
        and kernel name (kept in the session folder, so a kernel restart loses none of it)."""
        return self.log.drafts()

    def save_drafts(self, drafts: dict[str, dict[str, str]]) -> None:
        if not self.readonly:   # superseded is read-only too
            self.log.write_drafts(drafts)

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """Log a non-loop event (LLM exchanges, baselines, notes); replay ignores it."""
        if kind in EVENTS:
            raise InvalidEvent(f"{kind!r} is a loop event; post it instead")
        self.log.append(kind, payload)

    # ------------------------------------------------------------------ driving
    def advance(self, auto: bool = False) -> State:
        """Run agent and verify steps until a person is needed, or to the end with ``auto``.

        With ``auto`` every plan and candidate is approved and ``settings.iters`` refine
        iterations run, stopping early when the best speedup improves by less than 2%.
        """
        self._writable("carry it on")
        self._paused = None
        try:
            while not self.state.finished:
                needs = self.state.needs
                if needs == "plan":
                    self._plan()
                elif needs == "approve_plan":
                    if not auto:
                        break
                    self.post(PlanApproved())
                elif needs == "code":
                    self._code()
                elif needs == "approve_candidate":
                    if not auto:
                        break
                    for cid in list(self.state.pending):
                        self.post(CandidateApproved(cid))
                elif needs == "verify":
                    self._verify()
                elif needs == "next":
                    if not auto:
                        break
                    self.post(self._next_or_finish())
                else:  # pragma: no cover - the loop only has the needs above
                    raise InvalidEvent(f"unknown need {needs!r}")
        except BudgetExceeded as e:
            # A clean stop: nothing is lost and `resume` with a higher cap carries on.
            self.record("budget_reached", {"message": e.message, "spend": self.spend().to_dict()})
            self._paused = e.message
            self._checkpoint()
            raise
        except BaseException as e:
            # The session stays resumable: the error is logged, not made terminal.
            if not isinstance(e, KeyboardInterrupt):
                self.record("error", {"type": type(e).__name__, "message": str(e)})
                self._paused = str(getattr(e, "message", e))
                self._checkpoint()
            raise
        if self.state.finished:
            self._progress(f"{self.state.phase}: {self.state.message}", 1.0)
        self._checkpoint()
        return self.state

    def _plan(self) -> None:
        planner, _ = self._agents()
        self._progress(f"planning with the {self.agent} planner", self._fraction(0.05))
        plan = planner.plan(self.problem, self._analysed(), self.settings)
        self.post(PlanProposed(plan))
        self._progress(f"plan: {len(plan.tasks)} task(s)", self._fraction(0.1))

    def _code(self) -> None:
        _, coder = self._agents()
        it = self.state.iteration
        previous, feedback = self._reference()
        self._progress(f"iteration {it}: writing candidates", self._fraction(0.2))
        kw: dict[str, Any] = {}
        if _takes(coder.code, "attempts"):
            kw["attempts"] = self.state.attempts()
        if self.state.plan is None:     # pragma: no cover - the loop codes an approved plan
            raise InvalidEvent("there is no plan to write candidates for")
        try:
            cands = coder.code(self.problem, self._analysed(), self.state.plan, self.settings,
                               iteration=it, previous=previous, feedback=feedback, **kw)
        except ReplyError as e:
            # The model answered but nothing usable came: the iteration fails, the loop goes on
            # (the failure is shown to the coder next time).
            self._progress(f"iteration {it}: no usable candidate ({e.kind}): {e.message}", None)
            self.post(AttemptFailed(cause=e.kind, reason=e.message))
            return
        regenerated = self._just_regenerated()
        set_aside = {c.id for c in self.state.iteration_candidates()
                     if c.id not in self.state.verdicts} if regenerated else set()
        cands = [c for c in cands or [] if c.id not in self.state.verdicts]   # nothing twice
        if regenerated and not cands:
            # a person asked for other candidates and the coder has none: the session goes on
            # where it was (a deterministic coder writes the same ones again), never ends
            self.post(AttemptFailed(cause="no_new_candidate", reason=(
                "the coder has no other candidate for this plan: edit the plan's technique or "
                "params, or a kernel, or run the next iteration")))
            return
        if regenerated and {c.id for c in cands} <= set_aside:
            self._progress(f"iteration {it}: the coder wrote the same candidate(s) again; "
                           "edit the plan's technique or params, or a kernel, for another", None)
        if not cands:
            why = getattr(coder, "why_empty", "") or (
                "the coder has no candidate for this plan" if it == 0
                else f"the coder has no further variant to try after iteration {it - 1}")
            self.post(Finished(why))
            return
        self.post(CandidatesProposed(list(cands)))

    def _just_regenerated(self) -> bool:
        """Whether the last event is a person's Regenerate (progress records aside)."""
        for r in reversed(self.log.records()):
            if r.kind in EVENTS:
                return r.kind == Regenerate.kind
        return False

    def _verify(self) -> None:
        worker = self._get_worker()
        options = self._verify_options()
        ref_ops, reviewer = rubric.reference_ops(self.graph), self._reviewer()
        todo = list(self.state.approved)
        if self.settings.compile_modes and hasattr(worker, "baseline") and not any(
                r.kind == "baseline" for r in self.log.records()):
            # torch.compile baselines compile for up to a minute: time them once, saying so
            timings = self.baseline()
            self._progress("reference timed: " + ", ".join(
                f"{k} {v:.3g} ms" for k, v in timings.items() if not k.endswith("_wall")),
                self._fraction(0.3))
        # a candidate with no kernels of its own (a CUDA graph of the problem's forward, the
        # library alone) has nothing to build: it is judged first, so that a time limit
        # reached while the others build still leaves its verdict
        todo.sort(key=lambda c: bool(self.state.candidates[c].kernels))
        build = [c for c in todo if self.state.candidates[c].kernels]
        prebuild = len(build) > 1 and hasattr(worker, "prebuild") and self._builds_are_slow()
        for i, cid in enumerate(todo):
            if prebuild and cid == build[0]:
                self._prebuild(worker, build, options)
            self._progress(f"iteration {self.state.iteration}: verifying {cid} "
                           f"({i + 1}/{len(todo)})", self._fraction(0.3 + 0.7 * i / len(todo)))
            verdict = self._verify_one(worker, cid, options, ref_ops, reviewer)
            if self._worth_judging_again(verdict):
                # The host's load moved while it was timed, so its ratio compares two loads
                # and it ranks below every steady verdict (loop._best): on a busy host the
                # session returned a steady 1.50x over candidates flagged at 7.3-7.6x. A
                # candidate that would lead is judged once more, from scratch; the second
                # verdict is the one that counts, flagged or not.
                self._progress(f"{cid}: the host's load changed while it was timed "
                               f"({verdict.speedup_vs_eager:.3g}x): judging it again", None)
                self.record("judged_again", {"candidate": cid, "first": {
                    "speedup_vs_eager": verdict.speedup_vs_eager, "flags": verdict.flags}})
                verdict = self._verify_one(worker, cid, options, ref_ops, reviewer)
            self.post(VerdictReady(cid, verdict))
            self._progress(f"{cid}: {verdict.summary()}",
                           self._fraction(0.3 + 0.7 * (i + 1) / len(todo)))

    def _verify_one(self, worker: Any, cid: str, options: VerifyOptions, ref_ops: Any,
                    reviewer: Reviewer | None) -> Verdict:
        cand = self.state.candidates[cid]
        verdict = worker.verify(self.problem.source, cand.module_source(),
                                replaced=tuple(cand.replaced), kept=tuple(cand.kept),
                                options=options, timeout=self.settings.timeout)
        verdict.candidate_id = cid
        rubric.grade(cand, verdict, reference_ops=ref_ops, reviewer=reviewer,
                     problem=self.problem)
        return verdict

    def _worth_judging_again(self, v: Verdict) -> bool:
        """A passing verdict whose host load changed, faster than every steady one so far."""
        if v.status != "pass" or not load_changed(v.flags) or not v.speedup_vs_eager:
            return False
        steady = [w.speedup_vs_eager or 0.0 for w in self.state.verdicts.values()
                  if w.status == "pass" and not load_changed(w.flags)]
        return v.speedup_vs_eager > max(steady, default=0.0)

    def _builds_are_slow(self) -> bool:
        """Whether building side by side pays: this session's candidates took at least
        ``PREBUILD_MIN_MS`` to build (median), or, before any was built, the device is a GPU
        (its compiler takes seconds; a C kernel takes a fraction of one)."""
        # a prebuilt candidate's verdict shows a cache hit: its build time is the phase's
        built = {cid: b for r in self.log.records() if r.kind == "prebuilt"
                 for cid, b in r.payload.get("candidates", {}).items()}
        seen = [float(b["build_ms"]) for b in built.values() if b.get("build_ms")]
        seen += [v.timings["build"] for cid, v in self.state.verdicts.items()
                 if cid not in built and v.timings.get("build")]
        if not seen:
            return self.device.startswith("cuda")
        return statistics.median(seen) >= PREBUILD_MIN_MS

    def _prebuild(self, worker: Any, todo: list[str], options: VerifyOptions) -> None:
        """Several candidates' kernels compile side by side before each is verified alone
        (verifier/prebuild.py); what it finds decides nothing, so it is only logged."""
        self._progress(f"iteration {self.state.iteration}: building the kernels of "
                       f"{len(todo)} candidates side by side", self._fraction(0.3))
        t0 = time.perf_counter()
        built = worker.prebuild(self.problem.source,
                                [self.state.candidates[c].module_source() for c in todo],
                                options=options, timeout=self.settings.timeout)
        self.record("prebuilt", {"iteration": self.state.iteration,
                                 "wall_ms": round((time.perf_counter() - t0) * 1e3, 1),
                                 "candidates": dict(zip(todo, built))})

    def _reviewer(self) -> Reviewer | None:
        """The LLM judge when ``settings.judge`` is on and the Coder talks to an LLM."""
        if not self.settings.judge:
            return None
        _, coder = self._agents()
        coder = getattr(coder, "llm", coder)          # the hybrid coder's LLM half
        client = getattr(coder, "client", None)
        if client is None:
            return None
        from .agents.llm import LLMReviewer
        return LLMReviewer(client)

    def _next_or_finish(self) -> Event:
        s, iters = self.state, self.settings.iters
        if s.iteration >= iters:
            return Finished(f"ran {iters} refine iteration(s)")
        _, coder = self._agents()
        if not getattr(coder, "stops_early", True):   # sampling agents run to --iters
            return NextIteration()
        bbi = s.best_by_iteration
        if s.iteration >= 1 and len(bbi) > s.iteration:
            prev, cur = bbi[s.iteration - 1], bbi[s.iteration]
            if prev and cur is not None and cur < prev * (1 + NOISE):
                return Finished(f"gains under noise: best {cur:.3g}x after iteration "
                                f"{s.iteration} vs {prev:.3g}x before (< {NOISE:.0%})")
        return NextIteration()

    def _reference(self) -> tuple[Candidate | None, Verdict | None]:
        """What a refine iteration builds on: the person's newest passing edit when their
        edits are what was verified last (what they approved), else the best so far, else the
        last verdict's candidate."""
        if self.state.iteration == 0:
            return None, None
        for cid, v in reversed(list(self.state.verdicts.items())):
            cand = self.state.candidates.get(cid)
            if cand is None or cand.origin != "user":
                break
            if v.status == "pass":
                return cand, v
        best = self.state.best_pair()
        if best:
            return best
        last = self.state.last_verdict()
        if last is None:
            return None, None
        return self.state.candidates.get(last.candidate_id), last

    # ------------------------------------------------------------------ results
    def best(self) -> tuple[Candidate, Verdict] | None:
        return self.state.best_pair()

    def keeps_reference(self) -> bool:
        """True when no passing candidate is faster than eager: the reference is what to keep."""
        best = self.best()
        return best is None or (best[1].speedup_vs_eager or 0.0) <= 1.0

    def kept_reason(self) -> str | None:
        """Why the reference program is kept (None when a candidate beats eager): the ops the
        plan left to PyTorch, each as ``"<op>: <why>"``, then what the candidates did (slower
        than eager, or none passed). The CLI, the bench row and the panel all show this."""
        kept = self.kept_parts()
        return None if kept is None else "; ".join(kept[0] + kept[1]) or "no candidate beat eager"

    def kept_parts(self) -> tuple[list[str], list[str]] | None:
        """``kept_reason`` in its two parts: (the ops left to PyTorch, each ``"<op>: <why>"``;
        what the candidates did). None when a candidate beats eager."""
        if not self.keeps_reference():
            return None
        plan = self.state.plan
        blockers = plan.blockers()[:MAX_BLOCKERS] if plan is not None else []
        outcome: list[str] = []
        best = self.best()
        if best is not None:
            sp = best[1].speedup_vs_eager
            outcome.append("no candidate beat eager" + (f" (best {sp:.2f}x)" if sp else ""))
        else:
            last = self.state.last_verdict()
            if last is not None:
                outcome.append(f"no candidate passed (last: {last.status}"
                               + (f": {last.reason}" if last.reason else "") + ")")
            elif plan is not None and not plan.active():
                kept = [t.reason for t in plan.tasks if t.kind == "keep" and t.reason]
                if not blockers and kept:
                    blockers.append(kept[0])
                outcome.append("the plan has no kernel to write")
            elif self.state.message:
                outcome.append(self.state.message)
            elif self.state.candidates:   # cut short (a bench's time limit) before a verdict
                outcome.append("no candidate was judged")
        return blockers, outcome

    def model(self, device: str | None = None) -> torch.nn.Module:
        """The best candidate's ModelNew, built in this process (seeded like the reference)."""
        import torch

        best = self.best()
        if best is None:
            raise InvalidEvent("no candidate has passed verification yet",
                               hint="run s.advance(auto=True) or look at s.state.verdicts")
        cand = best[0]
        ns_problem = self.problem.namespace()
        src = Problem(name=f"candidate_{cand.id}", source=cand.module_source(),
                      origin=f"<candidate {cand.id}>")
        ns = src.namespace()
        if "ModelNew" not in ns:
            raise InvalidEvent(f"candidate {cand.id} defines no ModelNew")
        init = ns_problem.get("get_init_inputs", list)()
        torch.manual_seed(self.settings.seed)
        if self.keeps_reference():
            # what was asked for, but not what to use: say so where the caller sees it
            _warn(f"session {self.id}: {cand.id} is the best passing candidate but not faster "
                  f"than eager PyTorch ({self.kept_reason()}); the problem's own Model is the "
                  "faster program")
        return ns["ModelNew"](*init).to(device or self.device)

    def baseline(self) -> dict[str, float]:
        """Eager (and torch.compile) timings in ms of the reference, measured by the worker
        once per session and recorded; later calls return the recorded numbers."""
        recorded = self.recorded_baseline()
        if recorded is not None:
            return recorded
        worker = self._get_worker()
        modes = self.settings.compile_modes
        self._progress("timing the reference once: eager" + (
            f" and torch.compile ({modes}; compiling can take a minute)" if modes else ""),
            self._fraction(0.25) if self.state.iteration == 0 else None)
        timings = dict(worker.baseline(self.problem.source, options=self._verify_options()))
        if not self.readonly:
            self.record("baseline", {"timings": timings})
        return timings

    def recorded_baseline(self) -> dict[str, float] | None:
        """The baseline's timings if the session has timed it, without timing it."""
        for r in reversed(self.log.records()):
            if r.kind == "baseline":
                return dict(r.payload.get("timings") or {})
        return None

    def spend(self) -> Spend:
        """Tokens and cost of the session's LLM exchanges: total, per iteration, per role."""
        if self._spend is None:
            self._spend = Spend.from_exchanges(
                r.payload for r in self.log.records() if r.kind == "llm_exchange")
        return self._spend

    def facts(self) -> dict[str, Any]:
        """What the agents are told about the machine: the device's figures (``doctor``) and
        the Verifier's eager/torch.compile timings. Measured once and recorded."""
        if self._facts is None:
            recorded = next((r.payload for r in reversed(self.log.records())
                             if r.kind == "facts"), None)
            if recorded is None:
                recorded = self._measure_facts()
                if not self.readonly:
                    self.record("facts", recorded)
            self._facts = dict(recorded)
        return self._facts

    def _measure_facts(self) -> dict[str, Any]:
        """Facts are advice: what cannot be measured is left out, with the reason."""
        from .doctor import device_facts
        out: dict[str, Any] = {}
        self._progress(f"measuring {self.device} (bandwidth, FLOP/s)", None)
        try:
            with gpulock.exclusive(self.settings.gpu_lock):   # a measurement: the GPU alone
                out["device"] = device_facts(self.device)
        except Exception as e:  # noqa: BLE001 - the agents can work without the figures
            out["device_error"] = f"{type(e).__name__}: {e}"
        try:
            out["baseline"] = self.baseline()
        except StitchError as e:
            out["baseline_error"] = e.message
        return out

    def export(self, directory: str | os.PathLike, *, trajectories: bool = False) -> Path:
        from .export import export_session
        return export_session(self, directory, trajectories=trajectories)

    def records(self):
        return self.log.records()

    def close(self) -> None:
        """Give the session up (its lock). The shared worker stays up for other sessions."""
        if self.superseded:   # the newer object of this process holds the lock
            return
        self._checkpoint()
        self.log.release()
        key = self.dir.resolve()
        if key in _DRIVERS and _DRIVERS[key]() is self:
            del _DRIVERS[key]

    def __enter__(self) -> Session:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __str__(self) -> str:
        s = self.state
        lines = [f"Session {self.id} ({self.problem.name}, {self.device}, {self.agent})",
                 f"  phase {s.phase}, iteration {s.iteration}"
                 + (f", waiting for: {s.needs}" if s.needs else ""),
                 f"  folder {self.dir}"]
        if s.plan is not None:
            lines += ["  " + line for line in str(s.plan).splitlines()]
        best = self.best()
        lines.append(f"  best: {best[0].id}: {best[1].summary()}" if best else
                     f"  best: none yet ({len(s.verdicts)} verdict(s))")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html as _html
        s = self.state
        best = self.best()
        head = (f"<b>Session {_html.escape(self.id)}</b> · {_html.escape(self.problem.name)} · "
                f"{_html.escape(self.device)} · {_html.escape(self.agent)} · phase "
                f"{_html.escape(s.phase)}" + (f" · waiting for {_html.escape(s.needs)}"
                                               if s.needs else ""))
        plan = s.plan._repr_html_() if s.plan is not None else "<i>no plan yet</i>"
        verdict = (f"<p>best {_html.escape(best[0].id)}</p>{best[1]._repr_html_()}" if best
                   else "<p><i>no passing candidate yet</i></p>")
        return f"<div>{head}{plan}{verdict}</div>"

    # ------------------------------------------------------------------ helpers
    def _checkpoint(self) -> None:
        if self.readonly:
            return
        s = self.state
        paused = self._paused
        meta: dict[str, Any] = {"needs": s.needs, "last_seq": self.log.last_seq,
                                "iteration": s.iteration, "paused": paused}
        if s.finished:
            meta["status"] = {"done": "done", "stopped": "stopped", "failed": "failed"}[s.phase]
        elif paused is not None:
            meta["status"] = "paused"
        elif s.needs in ("approve_plan", "approve_candidate", "next"):
            meta["status"] = "waiting"
        best = s.best_pair()
        meta["best_candidate"] = best[0].id if best else None
        meta["speedup_vs_eager"] = best[1].speedup_vs_eager if best else None
        spend = self.spend()
        meta["spend"] = {"total_tokens": spend.total.total_tokens,
                         "cost_usd": round(spend.total.cost_usd, 6),
                         "by_iteration": {k: {"total_tokens": u.total_tokens,
                                              "cost_usd": round(u.cost_usd, 6)}
                                          for k, u in spend.by_iteration.items()}}
        try:
            self.log.update_meta(**meta)
        except (OSError, StoreError):   # a full disk: the log itself stays valid
            pass

    def _agents(self) -> tuple[Planner, Coder]:
        if self._planner is None or self._coder is None:
            from .agents.base import get_agents
            planner, coder = get_agents(self.agent, self.settings)
            self._planner = self._planner or planner
            self._coder = self._coder or coder
        if not self._recorders_attached:
            for a in (self._planner, self._coder):
                _attach_hooks(a, recorder=self._record_exchange, progress=self._agent_progress,
                              facts=self.facts, guard=self._guard)
            self._recorders_attached = True
        return self._planner, self._coder

    def _analysed(self) -> Graph:
        """The graph the agents read. A session reopened from a log that holds none (written
        before the graph was logged, or cut short) analyses the problem again and logs it."""
        if self.graph is None:
            self.graph = _analyse(self.problem, self.device, self.settings)
            if not self.readonly:
                self.log.append("graph", {"graph": self.graph.to_dict()})
        return self.graph

    def _record_exchange(self, payload: dict[str, Any]) -> None:
        spend = self.spend()          # read before this exchange is in the log
        self.record("llm_exchange", payload)
        spend.add(payload)

    def _guard(self, client: Any = None) -> None:
        """Before each LLM request: stop once the session's spending cap is reached."""
        cap_cost, cap_tokens = self.settings.max_cost, self.settings.max_total_tokens
        if cap_cost is None and cap_tokens is None:
            return
        total = self.spend().total
        if cap_cost is not None and client is not None and getattr(client, "price", 0) is None:
            raise BudgetExceeded(
                f"--max-cost cannot be enforced: {getattr(client, 'model', 'the model')} has "
                "no known price, so no request was sent",
                hint="set STITCH_PRICE=in,out (USD per million tokens) or cap tokens with "
                     "--max-tokens")
        if cap_cost is not None and total.cost_usd >= cap_cost:
            raise BudgetExceeded(f"the session spent ${total.cost_usd:.4f} of its "
                                 f"--max-cost ${cap_cost:g}; no further LLM request was sent",
                                 hint="resume with a higher --max-cost to carry on")
        if cap_tokens is not None and total.total_tokens >= cap_tokens:
            raise BudgetExceeded(f"the session used {total.total_tokens} tokens of its "
                                 f"--max-tokens {cap_tokens}; no further LLM request was sent",
                                 hint="resume with a higher --max-tokens to carry on")

    def _agent_progress(self, info: dict[str, Any]) -> None:
        line = progress_line(info, self.spend())
        if line:
            self._progress(line, None)

    def _get_worker(self) -> WorkerHandle:
        if self._worker is None:
            from .verifier.worker import get_worker     # looked up here: tests replace it
            self._worker = get_worker(self.device, self.settings)
        return self._worker

    def _verify_options(self) -> VerifyOptions:
        # the first iteration's jobs work towards the problem's first verdict: a GPU shared
        # by several problems serves them before other problems' refine rounds (gpulock.py)
        return VerifyOptions.from_settings(self.settings, first=self.state.iteration == 0)

    def _fraction(self, within: float) -> float:
        total = self.settings.iters + 1
        return min(1.0, (self.state.iteration + within) / total)

    def _progress(self, message: str, fraction: float | None) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(message, fraction)
            except Exception:  # noqa: BLE001, S110 - a broken display must not stop the loop
                pass


def _analyse(problem: Problem, device: str, settings: Settings) -> Graph:
    """The graph; a problem whose code raises while being analysed is a ProblemError naming
    its line."""
    try:
        return analyse(problem, device=device, profile=settings.profile, settings=settings)
    except StitchError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code raised
        raise _user_error("running the problem raised", e, problem.filename,
                          problem.source) from None


def _attach_hooks(agent: Any, **hooks: Callable[..., Any]) -> None:
    """Give agents that have the seams (``recorder``, ``progress``, ``facts``, ``guard``
    attributes left None) somewhere to record exchanges, report progress, read the session's
    facts and check its spending caps."""
    for attr, fn in hooks.items():
        if hasattr(agent, attr) and getattr(agent, attr) is None:
            setattr(agent, attr, fn)


def _takes(fn: Callable[..., Any], name: str) -> bool:
    """Does ``fn`` name the keyword ``name``? Agents opt in explicitly (a ``**kwargs`` that
    may forward to an older signature does not count), so older agents keep theirs."""
    import inspect
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def progress_line(info: dict[str, Any], spend: Spend | None = None) -> str:
    """One progress line for an agent event ("" for events not worth a line)."""
    who = f"{info.get('provider', 'agent')}: {info.get('role', '')} {info.get('task', '')}".strip()
    phase = info.get("phase")
    if phase == "waiting":
        return (f"{who}: {info.get('reason', 'busy')}, retrying in {info.get('seconds', 0):.1f} s "
                f"({info.get('retry')}/{info.get('retries')})")
    if phase == "retrying":
        extra = f" with max_tokens={info['max_tokens']}" if info.get("max_tokens") else ""
        return f"{who}: {info.get('reason')}, asking again{extra}"
    if phase == "repair":
        return (f"{who}: reply {info.get('reason')}, sent back to the model "
                f"({info.get('repair')}/{info.get('repairs')})")
    if phase == "result":
        from .spend import Usage
        one = Usage()
        one.add({"usage": info.get("usage") or {}, "cost_usd": info.get("cost_usd")})
        line = f"{who}: {info.get('outcome')} (attempt {info.get('attempt')}): {one.line()}"
        if spend is not None:
            line += f"; session {spend.total.line()}"
        return line
    if phase in ("streaming", "done"):
        return ""          # a character count is noise in a log; "result" follows "done"
    if phase == "start":
        return f"{who}: asking {info.get('model', '')}".rstrip()
    return f"{who} {phase}".strip()


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


__all__ = ["NOISE", "Session", "progress_line"]
