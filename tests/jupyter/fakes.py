"""A small Session on the real loop (``loop.step``) with scripted agents and verifier.

It follows the Session contract (docs/CONTRACTS.md) so the panel and magics can be tested
without compilers, workers or timing: a kernel whose code contains ``BUG`` fails verification.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, ClassVar

from stitchcuda_lab import loop
from stitchcuda_lab.candidate import Candidate, KernelSource
from stitchcuda_lab.plan import Plan, Task
from stitchcuda_lab.verdict import TrialResult, Verdict

_ids = itertools.count(1)

KERNEL = """void fused_add_relu(const float* x, float* out, long long n) {
    #pragma omp parallel for
    for (long long i = 0; i < n; ++i) {
        float v = x[i] + 1.0f;
        out[i] = v > 0.0f ? v : 0.0f;
    }
}"""


def rows(scale: float) -> list[dict[str, Any]]:
    return [
        {"lane": "CPU 0", "name": "aten::add", "start_us": 100.0, "dur_us": 10.0 * scale,
         "cat": "cpu_op"},
        {"lane": "CPU 0", "name": "aten::relu", "start_us": 100.0 + 12 * scale,
         "dur_us": 8.0 * scale, "cat": "cpu_op"},
        {"lane": "stream 7", "name": "vectorized_elementwise_kernel", "start_us": 105.0,
         "dur_us": 4.0 * scale, "cat": "kernel"},
    ]


class FakeSession:
    """Planner -> Coder -> Verifier on the real state machine, with scripted steps."""

    opened: ClassVar[dict[str, FakeSession]] = {}

    def __init__(self, problem: Any, settings: Any, agent: str = "offline"):
        self.id = f"fake-{next(_ids)}"
        self.dir = Path(settings.sessions_dir) / self.id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.problem = problem
        self.settings = settings
        self.agent = agent
        self.state = loop.State()
        self.graph = None
        self.on_progress = None
        self.posted: list[loop.Event] = []

    @classmethod
    def create(cls, problem: Any, settings: Any, agent: str = "offline",
               **seams: Any) -> FakeSession:
        s = cls(problem, settings, agent)
        cls.opened[s.id] = s
        return s

    @classmethod
    def open(cls, session_id: str, settings: Any = None) -> FakeSession:
        from stitchcuda_lab.errors import SessionNotFound
        if session_id not in cls.opened:
            raise SessionNotFound(f"no session {session_id!r}",
                                  hint="list them with %stitch_sessions")
        return cls.opened[session_id]

    def post(self, event: loop.Event) -> loop.State:
        self.posted.append(event)
        self.state = loop.step(self.state, event)
        return self.state

    def _progress(self, message: str, done: int, total: int) -> None:
        if self.on_progress:
            self.on_progress(message, done, total)

    def advance(self, auto: bool = False) -> loop.State:
        while not self.state.finished:
            need = self.state.needs
            if need == "plan":
                self._progress("planning", 0, 1)
                self.post(loop.PlanProposed(self._plan()))
            elif need == "approve_plan":
                if not auto:
                    return self.state
                self.post(loop.PlanApproved())
            elif need == "code":
                self._progress("coding", 0, 1)
                prev = self.state.best_pair()
                self.post(loop.CandidatesProposed([self._candidate(prev[0] if prev else None)]))
            elif need == "approve_candidate":
                if not auto:
                    return self.state
                for cid in list(self.state.pending):
                    self.post(loop.CandidateApproved(cid))
            elif need == "verify":
                for i, cid in enumerate(list(self.state.approved)):
                    self._progress(f"verifying {cid}", i, len(self.state.approved))
                    self.post(loop.VerdictReady(cid, self._verify(self.state.candidates[cid])))
            elif need == "next":
                if not auto:
                    return self.state
                if self.state.iteration < self.settings.iters:
                    self.post(loop.NextIteration())
                else:
                    self.post(loop.Finished("iterations done"))
        return self.state

    def _plan(self) -> Plan:
        return Plan(device="cpu", agent=self.agent, notes=["fake planner"], tasks=[
            Task(id="t1", kind="pointwise_fusion", ops=["add", "relu"],
                 targets=["aten.add.Tensor", "aten.relu.default"], share=0.8,
                 technique="one pass over x", reason="two memory-bound ops",
                 refs=["memory-coalescing"], params={"block": 256}),
            Task(id="t2", kind="keep", ops=["mm"], share=0.2, reason="the library GEMM is best"),
        ])

    def _candidate(self, prev: Candidate | None) -> Candidate:
        it = self.state.iteration
        code = KERNEL if prev is None else prev.kernels[0].code.replace(
            "#pragma omp parallel for", f"#pragma omp parallel for schedule(static, {64 * it})")
        return Candidate(program="class ModelNew: ...", iteration=it, origin="offline",
                         kernels=[KernelSource("fused_0", "c", code, ["fused_add_relu"])],
                         parent=prev.id if prev else None,
                         replaced=["aten.add.Tensor", "aten.relu.default"])

    def _verify(self, c: Candidate) -> Verdict:
        bad = any("BUG" in k.code for k in c.kernels)
        trials = [TrialResult(seed=42 + i, ok=not bad, max_abs_err=3.0 if bad else 1e-7,
                              max_rel_err=1.0 if bad else 1e-7, mismatches=512 if bad else 0)
                  for i in range(5)]
        speed = 1.5 + 0.25 * c.iteration
        return Verdict(status="incorrect" if bad else "pass", candidate_id=c.id, device="cpu",
                       correct=not bad, trials=trials, max_abs_err=trials[0].max_abs_err,
                       max_rel_err=trials[0].max_rel_err, atol=1e-4, rtol=1e-4,
                       reason="outputs differ in 512 elements" if bad else "",
                       timings={"eager": 0.3, "ours": 0.3 / speed},
                       speedup_vs_eager=None if bad else speed, build_log="cc -O3 ... ok",
                       profile={"reference": rows(1.0), "candidate": rows(1 / speed),
                                "kernels": {}, "ncu": {}})

    def best(self):
        return self.state.best_pair()

    def close(self) -> None:
        self.closed = True

    def model(self):
        import torch
        if self.best() is None:
            raise RuntimeError("no passing candidate")
        return torch.nn.ReLU()

    def export(self, directory) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        best = self.best()
        (d / "model_new.py").write_text(best[0].module_source() if best else "")
        (d / "verdict.json").write_text(json.dumps(best[1].to_dict() if best else {}))
        return d
