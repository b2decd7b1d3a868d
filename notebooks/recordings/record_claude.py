"""Write ``claude_bias_gelu_scale.jsonl``: the LLM exchanges tutorial 04 replays offline.

The session runs with ``agent="claude"`` through the real Anthropic SDK against the local
stand-in server of the test suite (``tests/fixtures/llm/fake_api.py``), which answers with the
scripted replies in ``tests/fixtures/llm/`` (Claude's tool-call format: a plan, a first kernel
with the wrong GELU form, the fix after the Verifier's feedback). So the file is a recording
of a session, but of scripted replies, not of a live Claude: rerun the tutorial with
``ANTHROPIC_API_KEY`` set and ``replay = False`` for that.

    .venv/bin/python notebooks/recordings/record_claude.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "llm"))

from fake_api import FakeAPI, ok  # noqa: E402

from stitchcuda_lab.agents.llm.client import DEFAULT_MODEL  # noqa: E402
from stitchcuda_lab.problem import load_problem  # noqa: E402
from stitchcuda_lab.session import Session  # noqa: E402
from stitchcuda_lab.settings import Settings  # noqa: E402

OUT = HERE / "claude_bias_gelu_scale.jsonl"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-recording-not-a-real-key"
        script = [ok("plan_reply.json"), ok("coder_iter0_reply.json"),
                  ok("coder_iter1_reply.json")]
        with FakeAPI(script) as api:
            settings = Settings(sessions_dir=f"{tmp}/sessions", cache_dir=f"{tmp}/cache",
                                device="cpu", compile_modes="", timing_trials=5, iters=1,
                                profile=False, model=DEFAULT_MODEL, base_url=api.url)
            s = Session.create(load_problem(ROOT / "notebooks" / "models" /
                                            "bias_gelu_scale.py"), settings, agent="claude")
            s.advance(auto=True)
            exchanges = [r.payload for r in s.records() if r.kind == "llm_exchange"]
            verdicts = [r.payload["verdict"]["status"] for r in s.records()
                        if r.kind == "verdict_ready"]
            s.close()
    OUT.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in exchanges))
    print(f"wrote {OUT} ({len(exchanges)} exchanges; verdicts {verdicts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
