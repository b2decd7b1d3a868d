"""Problem loading and validation: every way a problem breaks the contract names its line."""

from __future__ import annotations

import pickle
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from stitchcuda_lab.errors import ProblemError
from stitchcuda_lab.problem import load_problem, problem_from_objects, problem_from_source, validate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

GOOD = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.randn(n))

        def forward(self, x, alpha):
            return torch.relu(x * self.w) * alpha

    def get_inputs():
        return [torch.randn(4, 8), 0.5]

    def get_init_inputs():
        return [8]
    """)


def src(body: str) -> str:
    return textwrap.dedent(body)


def test_good_problem_validates_with_shapes_and_scalars():
    r = validate(problem_from_source(GOOD))
    assert r.input_shapes == [[4, 8], None]
    assert r.input_dtypes == ["float32", "float"]
    assert r.output_shapes == [[4, 8]]
    assert r.parameters == 8
    assert r.eager_ms is not None and r.eager_ms >= 0


def test_construction_is_seeded_like_kernelbench():
    p = problem_from_source(GOOD)
    a, b = p.make_model(seed=3), p.make_model(seed=3)
    assert torch.equal(a.w, b.w)
    assert not torch.equal(a.w, p.make_model(seed=4).w)
    assert torch.equal(p.make_inputs(seed=1)[0], p.make_inputs(seed=1)[0])
    assert not torch.equal(p.make_inputs(seed=1)[0], p.make_inputs(seed=2)[0])


def test_each_namespace_is_a_fresh_module_registered_for_pickling():
    body = GOOD + "\nimport dataclasses\n@dataclasses.dataclass\nclass Cfg:\n    k: int = 3\n"
    p = problem_from_source(body)
    ns1, ns2 = p.namespace(), p.namespace()
    assert ns1["Model"] is not ns2["Model"]
    assert ns1["__name__"] != ns2["__name__"]
    assert ns1["__name__"] in sys.modules
    cfg = pickle.loads(pickle.dumps(ns1["Cfg"](k=5)))
    assert cfg.k == 5


def test_syntax_error_names_the_line():
    with pytest.raises(ProblemError) as ei:
        problem_from_source("import torch\n\ndef get_inputs(:\n    pass\n")
    assert ei.value.line == 3
    assert "line 3" in str(ei.value) or ":3:" in str(ei.value)


def test_missing_file_is_a_problem_error(tmp_path):
    with pytest.raises(ProblemError, match="does not exist"):
        load_problem(tmp_path / "nope.py")


def test_file_problem_errors_name_the_path(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(GOOD.replace("return torch.relu(x * self.w) * alpha",
                              "return torch.relu(x @ self.w.view(2, 4)) * alpha"))
    with pytest.raises(ProblemError) as ei:
        validate(load_problem(f))
    assert ei.value.line == 10
    assert str(f) in str(ei.value)


def test_no_model():
    with pytest.raises(ProblemError, match="no `Model`"):
        validate(problem_from_source("import torch\ndef get_inputs():\n    return []\n"))


def test_no_get_inputs():
    with pytest.raises(ProblemError, match="get_inputs"):
        validate(problem_from_source(GOOD.replace("def get_inputs", "def make_inputs")))


def test_get_inputs_raising_names_its_line():
    bad = GOOD.replace("return [torch.randn(4, 8), 0.5]", "return [torch.randn(4, 8) + undefined]")
    with pytest.raises(ProblemError, match="get_inputs\\(\\) raised NameError") as ei:
        validate(problem_from_source(bad))
    assert ei.value.line == 13


def test_get_inputs_returning_non_tensors():
    bad = GOOD.replace("return [torch.randn(4, 8), 0.5]", "return [torch.randn(4, 8), 'x']")
    with pytest.raises(ProblemError, match="item 1 is a str") as ei:
        validate(problem_from_source(bad))
    assert ei.value.line == 12


def test_forward_raising_names_the_line_in_the_problem():
    bad = GOOD.replace("return torch.relu(x * self.w) * alpha",
                       "y = x * self.w\n        return y.view(3, -1) * alpha")
    with pytest.raises(ProblemError, match="forward raised RuntimeError") as ei:
        validate(problem_from_source(bad))
    assert ei.value.line == 11


def test_forward_returning_non_tensor():
    bad = GOOD.replace("return torch.relu(x * self.w) * alpha", "return {'y': x}")
    with pytest.raises(ProblemError, match="tensor or a tuple of tensors, got dict"):
        validate(problem_from_source(bad))


def test_tuple_of_tensors_is_fine():
    ok = GOOD.replace("return torch.relu(x * self.w) * alpha", "return x * alpha, x.sum(0)")
    assert validate(problem_from_source(ok)).output_shapes == [[4, 8], [8]]


def test_dropout_in_training_mode_is_named():
    bad = GOOD.replace("self.w = nn.Parameter(torch.randn(n))",
                       "self.w = nn.Parameter(torch.randn(n))\n        self.drop = nn.Dropout(0.3)"
                       ).replace("return torch.relu(x * self.w) * alpha",
                                 "return self.drop(x * self.w) * alpha")
    with pytest.raises(ProblemError, match=r"nondeterministic.*dropout.*\(drop\)"):
        validate(problem_from_source(bad))


def test_dropout_with_p_zero_is_deterministic():
    ok = GOOD.replace("self.w = nn.Parameter(torch.randn(n))",
                      "self.w = nn.Parameter(torch.randn(n))\n        self.drop = nn.Dropout(0.0)"
                      ).replace("return torch.relu(x * self.w) * alpha",
                                "return self.drop(x * self.w) * alpha")
    assert validate(problem_from_source(ok)).training is True


def test_random_op_in_forward_is_nondeterministic():
    bad = GOOD.replace("return torch.relu(x * self.w) * alpha",
                       "return x + torch.rand_like(x)")
    with pytest.raises(ProblemError, match="different outputs"):
        validate(problem_from_source(bad))


def test_module_code_raising_names_the_line():
    bad = GOOD + "\nraise ValueError('boom')\n"
    with pytest.raises(ProblemError, match="ValueError: boom") as ei:
        problem_from_source(bad).namespace()
    assert ei.value.line == GOOD.count("\n") + 2


def test_infinite_loop_at_import_times_out_in_a_subprocess():
    p = problem_from_source(GOOD + "\nwhile True:\n    pass\n")
    t0 = time.monotonic()
    with pytest.raises(ProblemError, match="did not finish validating within 3 s"):
        validate(p, timeout=3)
    assert time.monotonic() - t0 < 30


def test_subprocess_validation_reports_the_same_errors_and_report():
    bad = GOOD.replace("return [torch.randn(4, 8), 0.5]", "return [torch.randn(4, 8), 'x']")
    with pytest.raises(ProblemError, match="item 1 is a str") as ei:
        validate(problem_from_source(bad), timeout=60)
    assert ei.value.line == 12
    assert validate(problem_from_source(GOOD), timeout=60).output_shapes == [[4, 8]]


def test_problem_from_objects_recovers_source_of_a_module(tmp_path, monkeypatch):
    (tmp_path / "kb_mod_for_test.py").write_text(GOOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    import kb_mod_for_test as m
    p = problem_from_objects(m.Model, m.get_inputs, m.get_init_inputs)
    assert p.source == GOOD
    assert validate(p).output_shapes == [[4, 8]]


class _Scaled(torch.nn.Module):
    def forward(self, x):
        return x * _FACTOR


_FACTOR = 3.0


def _inputs():
    return [torch.ones(2, 2)]


def test_problem_from_objects_stitches_pieces_with_constants():
    p = problem_from_objects(_Scaled, _inputs)
    assert "class _Scaled" in p.source and "_FACTOR = 3.0" in p.source
    ns = p.namespace()
    assert torch.equal(ns["Model"]()(*ns["get_inputs"]()), torch.full((2, 2), 3.0))
    assert validate(p).output_shapes == [[2, 2]]


def test_problem_from_objects_without_source_says_so():
    ns: dict = {}
    exec(GOOD, ns)  # noqa: S102 - no file behind these objects: inspect cannot find their source
    p = problem_from_objects(ns["Model"], ns["get_inputs"], ns["get_init_inputs"])
    assert p.notes and "no source found" in p.notes[0]
    assert validate(p).output_shapes == [[4, 8]]


@pytest.mark.parametrize("name", ["pointwise_chain", "layernorm_gelu", "mlp"])
def test_examples_follow_the_contract(name):
    p = load_problem(EXAMPLES / f"{name}.py")
    ns = p.namespace()
    assert ns["__doc__"], "each example has a module docstring"
    r = validate(p, time_forward=False)
    assert r.output_shapes and r.parameters > 0


def test_pointwise_example_is_big_enough_and_has_six_pointwise_ops():
    p = load_problem(EXAMPLES / "pointwise_chain.py")
    assert p.make_inputs()[0].numel() >= 16 * 1024 * 1024
    fwd = p.source.split("def forward")[1].split("def get_inputs")[0]
    ops = sum(fwd.count(tok) for tok in (" * ", " + ", " - ", "sigmoid", "clamp", "tanh"))
    assert ops >= 6


@pytest.mark.gpu
def test_inputs_drawn_with_a_host_generator_reach_the_gpu_unchanged():
    """A CPU ``torch.Generator`` passed to ``randn`` is refused under ``torch.device("cuda")``:
    such a draw is made on the host from the same seed and moved, the same numbers as on CPU.
    A draw without one comes from the GPU's generator, as eager's would."""
    p = problem_from_source(GOOD.replace(
        "    return [torch.randn(4, 8), 0.5]",
        "    g = torch.Generator().manual_seed(3)\n"
        "    return [torch.randn(4, 8, generator=g), torch.randn(8), 0.5]"))
    on_gpu, on_host = p.make_inputs("cuda", seed=5), p.make_inputs("cpu", seed=5)
    assert all(x.device.type == "cuda" for x in on_gpu[:2]) and on_gpu[2] == 0.5
    assert torch.equal(on_gpu[0].cpu(), on_host[0])
    assert torch.equal(on_gpu[1], p.make_inputs("cuda", seed=5)[1])   # drawn alike each time


def test_the_draw_context_leaves_a_factory_with_a_generator_on_its_device():
    """What ``draw_on`` runs a GPU draw under, shown on the meta device (no GPU here): new
    tensors go to the context's device, a factory given a CPU generator draws on the CPU (and
    ``draw_on`` moves it), so both processes drawing from one seed get the same numbers."""
    from stitchcuda_lab.problem import _draw_context
    with _draw_context("meta"):
        g = torch.Generator().manual_seed(7)
        a, b = torch.randn(3, generator=g), torch.randn(2)
        c = torch.empty(4, device="cpu").normal_(generator=g)   # not a factory: as it is
    assert a.device.type == "cpu" and b.device.type == "meta" and c.device.type == "cpu"
    assert torch.equal(a, torch.randn(3, generator=torch.Generator().manual_seed(7)))
