"""The benchmark problems keep the KernelBench contract, run on CPU when shrunk, and are
GPU-sized (tens to hundreds of MB of input) at their full module constants."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch

PROBLEMS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "problems"
PROBLEMS = sorted(PROBLEMS_DIR.glob("[0-9][0-9]_*.py"))
CATEGORIES = {"pointwise", "softmax", "norm", "reduction", "gemm", "conv", "model"}
MIN_PER_CATEGORY = {"pointwise": 4, "softmax": 2, "norm": 5, "reduction": 2, "gemm": 4,
                    "conv": 3, "model": 4}
SHRINK = 8   # CPU runs divide every int module constant >= 64 by this


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shrink(module: ModuleType, factor: int = SHRINK) -> ModuleType:
    """Divide the size constants (upper-case ints >= 64) so a forward takes milliseconds."""
    for name, value in list(vars(module).items()):
        if name.isupper() and type(value) is int and value >= 64:
            setattr(module, name, value // factor)
    return module


def _run(module: ModuleType, seed: int = 0):
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        return model(*inputs), inputs


def _category(path: Path) -> str:
    return path.stem.split("_")[1]


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def test_there_are_at_least_24_problems_spread_over_the_categories():
    assert len(PROBLEMS) >= 24
    counts = {c: sum(_category(p) == c for p in PROBLEMS) for c in CATEGORIES}
    for category, minimum in MIN_PER_CATEGORY.items():
        assert counts[category] >= minimum, (category, counts)


def test_problem_numbers_are_unique():
    numbers = [p.name[:2] for p in PROBLEMS]
    assert len(numbers) == len(set(numbers))


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_file_name_and_docstring_name_the_category(path):
    assert re.fullmatch(r"\d\d_[a-z]+_[a-z0-9_]+", path.stem)
    assert _category(path) in CATEGORIES
    doc = _load(path).__doc__
    assert doc and "\n" not in doc.strip()
    assert doc.strip().startswith(_category(path) + ":")


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_shrunk_problem_runs_one_forward_on_cpu(path):
    module = _shrink(_load(path))
    assert isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)
    out, inputs = _run(module)
    assert inputs and all(isinstance(t, torch.Tensor) for t in inputs)
    assert all(t.dtype == torch.float32 for t in inputs)
    for tensor in _flat(out):
        assert isinstance(tensor, torch.Tensor)
        if tensor.is_floating_point():
            assert tensor.dtype == torch.float32
            assert torch.isfinite(tensor).all()


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_shrunk_problem_is_deterministic_under_a_fixed_seed(path):
    module = _shrink(_load(path))
    first, _ = _run(module, seed=123)
    second, _ = _run(module, seed=123)
    for a, b in zip(_flat(first), _flat(second), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_full_size_inputs_are_tens_to_hundreds_of_megabytes(path):
    module = _load(path)
    with torch.device("meta"):   # shapes only: nothing is allocated
        inputs = module.get_inputs()
        model = module.Model(*module.get_init_inputs())
        out = model(*inputs)
    mib = 2 ** 20
    input_bytes = sum(t.numel() * t.element_size() for t in inputs)
    assert 16 * mib <= input_bytes <= 1024 * mib, input_bytes / mib
    resident = input_bytes + sum(t.numel() * t.element_size()
                                 for t in [*model.state_dict().values(), *_flat(out)])
    assert resident <= 4 * 1024 * mib   # far below the H200's 141 GB with eager intermediates


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_size_constants_are_plain_lines_a_text_shrink_can_rewrite(path):
    # `stitchcuda-lab bench --shrink N` rewrites lines of the form `NAME = 123` in the source.
    module = _load(path)
    source = path.read_text()
    for name, value in vars(module).items():
        if name.isupper() and type(value) is int and value >= 64:
            assert re.search(rf"^{name} = {value}$", source, re.MULTILINE), name
