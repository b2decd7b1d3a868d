"""Helpers for the offline agents' tests: problems from source, candidates run in-process."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest
import torch

from stitchcuda_lab.agents.offline import OfflineCoder, OfflinePlanner
from stitchcuda_lab.graph import analyse
from stitchcuda_lab.problem import problem_from_source

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def make_problem(body: str, name: str = "p"):
    return problem_from_source(HEADER + textwrap.dedent(body), name=name)


def load_candidate(candidate, name: str = "cand"):
    """Import a candidate's module source as a fresh module (kernels build on import)."""
    mod = types.ModuleType(f"stitch_test_{name}_{candidate.id}")
    sys.modules[mod.__name__] = mod
    code = compile(candidate.module_source(), f"<candidate {candidate.id}>", "exec")
    exec(code, mod.__dict__)  # noqa: S102  (the candidate is what is under test)
    return mod


def run_both(problem, candidate, device: str = "cpu", seed: int = 0):
    """(reference outputs, candidate outputs, reference model, candidate model) on fresh inputs."""
    mod = load_candidate(candidate, problem.name)
    ns = problem.namespace()
    init = ns.get("get_init_inputs", list)()
    torch.manual_seed(42)
    ref = ns["Model"](*init).to(device)
    torch.manual_seed(42)
    new = mod.ModelNew(*init).to(device)
    inputs = problem.make_inputs(device=device, seed=seed)
    with torch.no_grad():
        want = ref(*[x.clone() if torch.is_tensor(x) else x for x in inputs])
        got = new(*[x.clone() if torch.is_tensor(x) else x for x in inputs])
    return want, got, ref, new


def assert_close(got, want, atol=1e-4, rtol=1e-4):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, atol, rtol)
        return
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.is_floating_point():
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
    else:
        assert torch.equal(got, want)


def generate(problem, settings, device: str = "cpu"):
    """(graph, plan, first candidate) through the offline agents."""
    graph = analyse(problem, device=device, profile=False, settings=settings)
    plan = OfflinePlanner().plan(problem, graph, settings)
    cand = OfflineCoder().code(problem, graph, plan, settings, iteration=0)[0]
    return graph, plan, cand


@pytest.fixture(autouse=True)
def _isolated_kernel_cache(tmp_path_factory, monkeypatch):
    # generated programs call runtime.load, which reads the cache folder from the environment
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kcache"))


@pytest.fixture(scope="package")
def judge(tmp_path_factory, make_settings):
    """One CPU Verifier for the offline agents' tests that only need verdicts: starting a judge
    (its processes import torch) costs about ten seconds on two cores, a verdict two. Each
    candidate still runs in a process of its own; the shared part is the judge and its cache."""
    from stitchcuda_lab.verifier.options import VerifyOptions
    from stitchcuda_lab.verifier.worker import Worker

    settings = make_settings(tmp_path_factory.mktemp("judge"))   # the defaults of `settings`
    worker = Worker("cpu", cache_dir=settings.cache_dir)

    def verify(problem, cand):
        return worker.verify(problem.source, cand.module_source(), replaced=cand.replaced,
                             kept=cand.kept, options=VerifyOptions.from_settings(settings),
                             timeout=300)

    yield verify
    worker.close()
