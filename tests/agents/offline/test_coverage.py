"""Coverage of the offline agents: each op family in tests/fixtures/coverage (small problems in
KernelBench form) gets a candidate whose kernels replace every computing op but the library's
GEMMs, and that candidate matches eager and passes the real Verifier on CPU. The CUDA source of
the same plans is checked as text (64-bit index math past 2^31 elements); compiling and running
it is a ``gpu`` test."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitchcuda_lab.problem import problem_from_source

from .conftest import assert_close, generate, run_both

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "coverage"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.py"))


def fixture(name: str):
    path = FIXTURES / f"{name}.py"
    return problem_from_source(path.read_text(), name=name, origin=str(path))


@pytest.mark.parametrize("name", NAMES)
def test_each_family_gets_kernels_for_every_computing_op(name, settings):
    problem = fixture(name)
    _graph, plan, cand = generate(problem, settings)
    assert plan.blockers() == [], plan.blockers()
    assert cand.kernels and cand.replaced
    want, got, _, _ = run_both(problem, cand)
    assert_close(got, want)


@pytest.mark.parametrize("name", NAMES)
def test_each_family_passes_the_verifier_on_cpu(name, settings):
    from stitchcuda_lab.verifier.options import VerifyOptions
    from stitchcuda_lab.verifier.worker import get_worker

    problem = fixture(name)
    _, _, cand = generate(problem, settings)
    worker = get_worker("cpu", settings)
    verdict = worker.verify(problem.source, cand.module_source(), replaced=cand.replaced,
                            kept=cand.kept, options=VerifyOptions.from_settings(settings),
                            timeout=300)
    assert verdict.status == "pass", verdict.reason
