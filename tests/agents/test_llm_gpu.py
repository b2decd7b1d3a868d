"""The LLM Coder's runtime contract on a real GPU: a recorded CUDA candidate, replayed.

The coder prompt teaches NVRTC device code launched with ``mod.launch`` (int -> long long,
float -> float); this runs a reply written to that contract through the Session and the
Verifier on CUDA. Replay needs no anthropic SDK and no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stitchcuda_lab.agents import rubric
from stitchcuda_lab.agents.llm import LLMCoder, LLMPlanner, ReplayClient
from stitchcuda_lab.problem import load_problem
from stitchcuda_lab.session import Session
from stitchcuda_lab.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"

pytestmark = pytest.mark.gpu


def _exchange(role: str, reply_file: str) -> dict:
    message = json.loads((FIXTURES / reply_file).read_text())
    tool = next(b for b in message["content"] if b["type"] == "tool_use")
    return {"role": role, "provider": "claude", "model": message["model"],
            "reply": {"input": tool["input"], "stop_reason": message["stop_reason"]},
            "usage": message["usage"]}


def test_recorded_cuda_candidate_passes_on_the_gpu(tmp_path):
    client = ReplayClient([_exchange("planner", "plan_reply.json"),
                           _exchange("coder", "coder_cuda_reply.json")])
    settings = Settings(sessions_dir=str(tmp_path / "sessions"), cache_dir=str(tmp_path / "c"),
                        device="cuda:0", iters=0, compile_modes="", profile=False)
    session = Session.create(load_problem(FIXTURES / "bias_gelu_scale_problem.py"), settings,
                             agent="claude", planner=LLMPlanner(client, knowledge=None),
                             coder=LLMCoder(client, knowledge=None))
    try:
        session.advance(auto=True)
        best = session.best()
        verdicts = [r.payload["verdict"] for r in session.records() if r.kind == "verdict_ready"]
        assert best is not None, verdicts
        cand, verdict = best
        assert verdict.status == "pass" and verdict.device.startswith("cuda")
        assert cand.kernels[0].lang == "cuda"
        s = rubric.score(cand, verdict, reference_ops=[
            "aten.add.Tensor", "aten.gelu.default", "aten.mul.Tensor"])
        assert s["cuda_engineering"]["score"] == 1.0 and s["coverage"]["score"] == 1.0
    finally:
        session.close()
