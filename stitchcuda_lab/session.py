"""Session: drives the loop with the agents, the Verifier and the store (what CLI and notebook use).

Every event is written to the session log before the state moves on, so a session killed at
any point reopens with ``Session.open`` (replaying its events) and carries on from there.

Example (runs the model, so not a doctest)::

    s = Session.create(load_problem("examples/mlp.py"), Settings())
    s.advance()                   # plans, then stops: the plan needs a person's approval
    s.post(PlanApproved()); s.advance()
    s.advance(auto=True)          # or run everything without stops
    s.best(), s.model(), s.export("out/")
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import aten
from .errors import InvalidEvent, ServiceError, StitchError, StoreError, WorkerError
from .loop import (
    EVENTS,
    CandidateApproved,
    CandidatesProposed,
    Event,
    Finished,
    NextIteration,
    PlanApproved,
    PlanProposed,
    State,
    VerdictReady,
    event_from_payload,
    step,
)
from .plan import Candidate, Shown, Verdict
from .problem import Problem
from .settings import Settings
from .store import SessionLog, SessionStore, StoreWarning

if TYPE_CHECKING:
    import torch

    from .graph import Graph

ProgressFn = Callable[[str, "float | None"], None]
NOISE = 0.02          # a refine iteration must beat the best so far by 2% to keep going


class Session(Shown):
    """One optimisation of one problem on one device, backed by a session folder."""

    def __init__(self, log: SessionLog, problem: Problem, settings: Settings, *, agent: str,
                 device: str, state: State | None = None, graph: Graph | None = None,
                 planner: Any = None, coder: Any = None, worker: Any = None,
                 on_progress: ProgressFn | None = None):
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

    # ------------------------------------------------------------------ construction
    @property
    def id(self) -> str:
        return self.log.id

    @property
    def dir(self) -> Path:
        return self.log.dir

    @classmethod
    def create(cls, problem: Problem, settings: Settings | None = None, agent: str | None = None,
               *, device: str | None = None, planner: Any = None, coder: Any = None,
               worker: Any = None, graph: Graph | None = None,
               on_progress: ProgressFn | None = None) -> Session:
        """A new session folder for ``problem``; analyses its graph on the chosen device.

        ``planner``, ``coder`` and ``worker`` replace the agents and the Verifier's worker
        (tests, custom agents); by default they come from ``settings.agent`` and the toolchain.
        """
        settings = settings or Settings.from_env()
        agent = agent or settings.agent
        device = resolve_device(device or settings.device)
        if graph is None:   # first, so a broken problem leaves no session folder behind
            if on_progress is not None:
                on_progress("analysing the model's graph", 0.0)
            graph = _analyse(problem, device, settings)
        store = SessionStore(settings.sessions_dir)
        log = store.create({"problem": problem.name, "origin": problem.origin, "device": device,
                            "agent": agent, "iters": settings.iters,
                            "problem_sha256": problem.digest()})
        log.append("session_created", {
            "problem": {"name": problem.name, "source": problem.source,
                        "origin": problem.origin, "notes": problem.notes},
            "device": device, "agent": agent, "settings": _safe_settings(settings)})
        s = cls(log, problem, settings, agent=agent, device=device, graph=graph,
                planner=planner, coder=coder, worker=worker, on_progress=on_progress)
        if graph is not None:
            log.append("graph", {"graph": graph.to_dict()})
        return s

    @classmethod
    def open(cls, session: str | os.PathLike, settings: Settings | None = None, *,
             iters: int | None = None, planner: Any = None, coder: Any = None,
             worker: Any = None, on_progress: ProgressFn | None = None,
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
                                    else recorded.get("iters", settings.iters))
        graph = None
        state = State()
        for r in records:
            if r.kind == "graph" and r.payload.get("graph"):
                graph = _graph_from_dict(r.payload["graph"])
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
        return s

    # ------------------------------------------------------------------ events
    def post(self, event: Event) -> State:
        """Apply one event: checked by the loop, written to the log, then taken as the state."""
        if self.readonly:
            raise InvalidEvent(f"session {self.id} was opened read-only",
                               hint="open it with Session.open(..., lock=True) to change it")
        new = step(self.state, event)
        self.log.append(event.kind, event.payload())
        self.state = new
        return new

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
        if self.readonly:
            raise InvalidEvent(f"session {self.id} was opened read-only",
                               hint="open it with Session.open(..., lock=True) to carry it on")
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
        except BaseException as e:
            # The session stays resumable: the error is logged, not made terminal.
            if not isinstance(e, KeyboardInterrupt):
                self.record("error", {"type": type(e).__name__, "message": str(e)})
            raise
        self._checkpoint()
        return self.state

    def _plan(self) -> None:
        planner, _ = self._agents()
        self._progress(f"planning with the {self.agent} planner", self._fraction(0.05))
        plan = planner.plan(self.problem, self.graph, self.settings)
        self.post(PlanProposed(plan))
        self._progress(f"plan: {len(plan.tasks)} task(s)", self._fraction(0.1))

    def _code(self) -> None:
        _, coder = self._agents()
        it = self.state.iteration
        previous, feedback = self._reference()
        self._progress(f"iteration {it}: writing candidates", self._fraction(0.2))
        cands = coder.code(self.problem, self.graph, self.state.plan, self.settings,
                           iteration=it, previous=previous, feedback=feedback)
        cands = [c for c in cands or [] if c.id not in self.state.verdicts]   # nothing twice
        if not cands:
            why = ("the coder has no candidate for this plan" if it == 0
                   else f"the coder has no further variant to try after iteration {it - 1}")
            self.post(Finished(why))
            return
        self.post(CandidatesProposed(list(cands)))

    def _verify(self) -> None:
        worker = self._get_worker()
        options = self._verify_options()
        todo = list(self.state.approved)
        for i, cid in enumerate(todo):
            cand = self.state.candidates[cid]
            self._progress(f"iteration {self.state.iteration}: verifying {cid} "
                           f"({i + 1}/{len(todo)})", self._fraction(0.3 + 0.7 * i / len(todo)))
            verdict = worker.verify(self.problem.source, cand.module_source(),
                                    replaced=tuple(cand.replaced), kept=tuple(cand.kept),
                                    options=options, timeout=self.settings.timeout)
            verdict.candidate_id = cid
            self._score(cand, verdict)
            self.post(VerdictReady(cid, verdict))
            self._progress(f"{cid}: {verdict.summary()}", None)

    def _score(self, cand: Candidate, verdict: Verdict) -> None:
        """Fill the verdict's rubric scores and reward tier (rules over the Verifier's facts)."""
        from .agents import rubric
        graph = self.graph
        ref_ops = ([n.target for n in graph.calls() if aten.computes(n.target)]
                   if graph else None)
        try:
            verdict.rubric = rubric.score(cand, verdict, reference_ops=ref_ops)
            verdict.reward = verdict.rubric.get("reward", rubric.reward(verdict))
        except Exception as e:  # noqa: BLE001  (a scoring bug must not lose a verdict)
            verdict.rubric = {"error": f"{type(e).__name__}: {e}"}
            verdict.reward = rubric.reward(verdict)
            return
        reviewer = self._reviewer()
        if reviewer is None:
            return
        try:
            judged = reviewer.score(cand, verdict, problem=self.problem, reference_ops=ref_ops)
        except StitchError as e:   # the judge is advice: its failure keeps the rule scores
            verdict.rubric["judge_error"] = e.message
            return
        verdict.rubric = judged
        verdict.reward = judged.get("reward", verdict.reward)

    def _reviewer(self):
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
        bbi = s.best_by_iteration
        if s.iteration >= 1 and len(bbi) > s.iteration:
            prev, cur = bbi[s.iteration - 1], bbi[s.iteration]
            if prev and cur is not None and cur < prev * (1 + NOISE):
                return Finished(f"gains under noise: best {cur:.3g}x after iteration "
                                f"{s.iteration} vs {prev:.3g}x before (< {NOISE:.0%})")
        return NextIteration()

    def _reference(self) -> tuple[Candidate | None, Verdict | None]:
        """What a refine iteration builds on: the best so far, else the last verdict's one."""
        if self.state.iteration == 0:
            return None, None
        best = self.state.best_pair()
        if best:
            return best
        v = self.state.last_verdict()
        if v is None:
            return None, None
        return self.state.candidates.get(v.candidate_id), v

    # ------------------------------------------------------------------ results
    def best(self) -> tuple[Candidate, Verdict] | None:
        return self.state.best_pair()

    def keeps_reference(self) -> bool:
        """True when no passing candidate is faster than eager: the reference is what to keep."""
        best = self.best()
        return best is None or (best[1].speedup_vs_eager or 0.0) <= 1.0

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
        return ns["ModelNew"](*init).to(device or self.device)

    def baseline(self) -> dict[str, float]:
        """Eager (and torch.compile) timings in ms of the reference, measured by the worker
        once per session and recorded; later calls return the recorded numbers."""
        for r in reversed(self.log.records()):
            if r.kind == "baseline":
                return dict(r.payload.get("timings") or {})
        worker = self._get_worker()
        self._progress("timing the eager baseline", None)
        kw = {"options": self._verify_options()} if self._verify_options() is not None else {}
        timings = dict(worker.baseline(self.problem.source, **kw))
        if not self.readonly:
            self.record("baseline", {"timings": timings})
        return timings

    def export(self, directory: str | os.PathLike, *, trajectories: bool = False) -> Path:
        from .export import export_session
        return export_session(self, directory, trajectories=trajectories)

    def records(self):
        return self.log.records()

    def close(self) -> None:
        """Give the session up (its lock). The shared worker stays up for other sessions."""
        self._checkpoint()
        self.log.release()

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
        meta: dict[str, Any] = {"needs": s.needs, "last_seq": self.log.last_seq,
                                "iteration": s.iteration}
        if s.finished:
            meta["status"] = {"done": "done", "stopped": "stopped", "failed": "failed"}[s.phase]
        elif s.needs in ("approve_plan", "approve_candidate", "next"):
            meta["status"] = "waiting"
        best = s.best_pair()
        meta["best_candidate"] = best[0].id if best else None
        meta["speedup_vs_eager"] = best[1].speedup_vs_eager if best else None
        try:
            self.log.update_meta(**meta)
        except (OSError, StoreError):   # a full disk: the log itself stays valid
            pass

    def _agents(self):
        if self._planner is None or self._coder is None:
            from .agents.base import get_agents
            try:
                planner, coder = get_agents(self.agent, self.settings)
            except ImportError as e:
                raise ServiceError(f"the {self.agent} agents are not available "
                                   f"({type(e).__name__}: {e})",
                                   hint="reinstall stitchcuda-lab; `stitchcuda-lab doctor` "
                                        "says what is missing") from None
            self._planner = self._planner or planner
            self._coder = self._coder or coder
        if not self._recorders_attached:
            for a in (self._planner, self._coder):
                _attach_hooks(a, self._record_exchange, self._agent_progress)
            self._recorders_attached = True
        return self._planner, self._coder

    def _record_exchange(self, payload: dict[str, Any]) -> None:
        self.record("llm_exchange", payload)

    def _agent_progress(self, info: dict[str, Any]) -> None:
        what = " ".join(str(info[k]) for k in ("role", "task", "phase") if info.get(k))
        self._progress(f"{info.get('provider', 'agent')}: {what}", None)

    def _get_worker(self):
        if self._worker is None:
            try:
                from .toolchain.worker import get_worker
            except ImportError as e:
                raise WorkerError(f"the Verifier's worker is not available ({e})",
                                  hint="`stitchcuda-lab doctor` says what is missing") from None
            self._worker = get_worker(self.device, self.settings)
        return self._worker

    def _verify_options(self):
        try:
            from .toolchain.verify import VerifyOptions
        except ImportError:
            return None
        return VerifyOptions.from_settings(self.settings)

    def _fraction(self, within: float) -> float:
        total = self.settings.iters + 1
        return min(1.0, (self.state.iteration + within) / total)

    def _progress(self, message: str, fraction: float | None) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(message, fraction)
            except Exception:  # noqa: BLE001, S110 - a broken display must not stop the loop
                pass


def _analyse(problem: Problem, device: str, settings: Settings) -> Graph | None:
    """The graph, or None when graph.py is missing; a problem whose code raises while being
    analysed is a ProblemError naming its line."""
    try:
        from .graph import analyse
    except ImportError as e:
        _warn(f"graph analysis is not available ({e}); planning without a graph")
        return None
    try:
        return analyse(problem, device=device, profile=settings.profile, settings=settings)
    except StitchError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code raised
        from .problem import _user_error
        raise _user_error("running the problem raised", e, problem.filename,
                          problem.source) from None


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is usable, else ``cpu`` (the toolchain's rule)."""
    try:
        from .toolchain.worker import resolve_device as _resolve
    except ImportError:
        if name != "auto":
            return name
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    return _resolve(name)


def _attach_hooks(agent: Any, recorder: Callable[[dict], None],
                  progress: Callable[[dict], None]) -> None:
    """Give agents that have the seams (``recorder``, ``progress`` attributes left None)
    somewhere to record their LLM exchanges and report progress."""
    for attr, fn in (("recorder", recorder), ("progress", progress)):
        if hasattr(agent, attr) and getattr(agent, attr) is None:
            setattr(agent, attr, fn)


def _safe_settings(settings: Settings) -> dict[str, Any]:
    d = settings.as_dict()
    d.pop("base_url", None)     # may carry credentials in its userinfo part
    return d


def _graph_from_dict(d: dict[str, Any]):
    try:
        from .graph import Graph
    except ImportError:
        return None
    return Graph.from_dict(d)


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


__all__ = ["NOISE", "Session", "resolve_device"]
