"""The rubric as an optional LLM judge: rule scores first, the judge's scores merged in.

The judge sees the candidate's kernels and program, the Verifier's facts and the rule rubric,
and answers through the ``submit_review`` tool; ``rubric.merge_judge`` combines the two (the
judge can lower anti-hacking and compliance, never raise them above the rules).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ...candidate import Candidate
from ...verdict import Verdict
from .. import rubric
from .coder import feedback_text
from .context import fence, prompt
from .schema import REVIEW_SCHEMA
from .structured import Request, StructuredClient, Tool

if TYPE_CHECKING:
    from ...problem import Problem

REVIEW_TOOL = Tool("submit_review", "Submit the four rubric scores with one-line reasons.",
                   REVIEW_SCHEMA)


class LLMReviewer:
    name = "reviewer"

    def __init__(self, client: StructuredClient):
        self.client = client

    def judge(self, problem: Problem | None, candidate: Candidate, verdict: Verdict,
              rules: dict[str, Any]) -> dict[str, Any]:
        """The judge's raw ``{criterion: {"score", "reason"}, "notes"}``."""
        context = ""
        if problem is not None:
            context = "## Reference model\n" + fence(problem.source, "python")
        parts = [(f"## Candidate {candidate.id} (iteration {candidate.iteration}, "
                  f"{candidate.origin})")]
        for k in candidate.kernels:
            parts += [f"### kernel `{k.name}` ({k.lang})", fence(k.code, "c")]
        parts += ["### program", fence(candidate.program, "python"),
                  (f"replaced: {', '.join(candidate.replaced) or '(none)'}; "
                   f"kept: {', '.join(candidate.kept) or '(none)'}"),
                  "## Verifier facts", feedback_text(verdict),
                  "## Rule rubric", fence(json.dumps(
                      {k: rules[k] for k in rubric.CRITERIA}, indent=1, sort_keys=True), "json"),
                  "Call submit_review."]
        request = Request(role="reviewer", task=f"review:{candidate.id}",
                          iteration=candidate.iteration, system=prompt("reviewer"),
                          context=context, user="\n\n".join(parts), tool=REVIEW_TOOL)
        return self.client.ask(request).data

    def score(self, candidate: Candidate, verdict: Verdict, *, problem: Problem | None = None,
              reference_ops: Iterable[str] | None = None) -> dict[str, Any]:
        """Rule rubric merged with the judge's scores (``rubric.score`` plus ``judge``)."""
        rules = rubric.score(candidate, verdict, reference_ops=reference_ops)
        return rubric.merge_judge(rules, self.judge(problem, candidate, verdict, rules))
