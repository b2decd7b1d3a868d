"""Problem: a PyTorch model in KernelBench form (``Model``, ``get_inputs``, ``get_init_inputs``).

A problem is always kept as Python source, so the isolated worker, the session store and the
agents can all see the same text. It comes from a file, a notebook cell, or live Python objects
(their source is recovered with ``inspect``). ``validate`` runs it once and turns every way it
can break the contract into a ``ProblemError`` that names the line.

>>> p = problem_from_source('''
... import torch, torch.nn as nn
... class Model(nn.Module):
...     def forward(self, x):
...         return torch.relu(x)
... def get_inputs():
...     return [torch.randn(8)]
... def get_init_inputs():
...     return []
... ''')
>>> validate(p).output_shapes
[[8]]
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import linecache
import os
import subprocess
import sys
import textwrap
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import ProblemError
from .settings import public_environ

_counter = itertools.count()
_REF_MARK = "# stitchcuda-lab: objects held by reference"


@dataclass
class Problem:
    """The source of a KernelBench-style problem and where it came from."""

    name: str              # file stem or "cell"
    source: str            # full Python source of the problem module (always present)
    origin: str            # file path, "<cell>" or "<objects>"
    notes: list[str] = field(default_factory=list)   # how the source was obtained, caveats
    _objects: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def digest(self) -> str:
        """sha256 of the source: the problem's identity in caches and sessions."""
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def filename(self) -> str:
        """The name tracebacks show for this source (the path for files)."""
        if self.origin not in ("<cell>", "<objects>") and not self.origin.startswith("<"):
            return self.origin
        return f"<stitch-problem {self.name} {self.digest()[:8]}>"

    def namespace(self) -> dict[str, Any]:
        """A fresh execution of the source as a new module; returns its globals.

        The module gets a unique name and stays registered in ``sys.modules`` so dataclasses,
        pickling and ``inspect`` work on what it defines.
        """
        if self._objects is not None and self.source.startswith(_REF_MARK) \
                and "\nfrom " not in self.source:
            return dict(self._objects)
        return _exec_module(self.source, self.filename, self.name)

    def make_model(self, device: str = "cpu", seed: int = 42, ns: dict | None = None):
        """``torch.manual_seed(seed)``, then ``Model(*get_init_inputs())`` on ``device``.

        The training flag stays as the source leaves it (KernelBench semantics).
        """
        import torch
        ns = self.namespace() if ns is None else ns
        init = ns.get("get_init_inputs", list)
        torch.manual_seed(seed)
        model = ns["Model"](*init())
        return model.to(device)

    def make_inputs(self, device: str = "cpu", seed: int = 42, ns: dict | None = None) -> list:
        """Seeded ``get_inputs()`` with tensors on ``device``: on a GPU made there directly,
        as the Verifier draws them (KernelBench's inputs of billions of elements take seconds
        to draw on the host and more to copy over); tensors the problem pins to a device are
        moved afterwards."""
        import torch
        ns = self.namespace() if ns is None else ns
        return draw_on(ns["get_inputs"], str(device), lambda: torch.manual_seed(seed))

    def __str__(self) -> str:
        return f"Problem {self.name} ({self.origin}, {self.source.count(chr(10)) + 1} lines)"


def draw_on(get_inputs, device: str, seed) -> list:
    """``get_inputs()`` after ``seed()``, its tensors on ``device``.

    On a GPU the draw runs under a device context, so new tensors are made there directly;
    a factory given a generator of another device (a CPU ``torch.Generator`` passed to
    ``randn``) draws on that generator's device and is moved, as it would be without the
    context. Every process that draws from the same seed takes the same path: the judge and a
    candidate's sandbox must get the same numbers.
    """
    import torch
    seed()
    if device.startswith("cuda"):
        with _draw_context(device):
            xs = get_inputs()
    else:
        xs = get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _draw_context(device: str):
    """``torch.device(device)`` as a context, but leaving a factory that names a generator to
    that generator's device (the plain context makes ``randn(n, generator=cpu_gen)`` fail)."""
    import torch
    try:
        from torch.utils._device import DeviceContext, _device_constructors
    except ImportError:   # a torch without them: the plain context
        return torch.device(device)

    class _GeneratorsKeepTheirDevice(DeviceContext):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            g = kwargs.get("generator")
            if func in _device_constructors() and kwargs.get("device") is None \
                    and isinstance(g, torch.Generator) and g.device.type != self.device.type:
                kwargs["device"] = g.device
            return super().__torch_function__(func, types, args, kwargs)

    return _GeneratorsKeepTheirDevice(torch.device(device))


@dataclass
class ProblemReport:
    """What one validating run saw: shapes, dtypes, parameters and eager time."""

    name: str
    device: str
    input_shapes: list        # a list per input; None for ints/floats
    input_dtypes: list
    output_shapes: list
    output_dtypes: list
    parameters: int
    training: bool
    eager_ms: float | None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- loading


def load_problem(path: str | os.PathLike) -> Problem:
    """Read a problem file. Raises ProblemError if it is missing or not valid Python."""
    p = Path(path)
    if not p.exists():
        raise ProblemError(f"problem file {str(p)!r} does not exist",
                           hint="give the path of a .py file with Model and get_inputs")
    if p.is_dir():
        raise ProblemError(f"{str(p)!r} is a folder, not a problem file",
                           hint="give the path of a .py file with Model and get_inputs")
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"cannot read {str(p)!r}: {e}") from None
    return problem_from_source(source, name=p.stem, origin=str(p))


def problem_from_source(source: str, name: str = "cell", origin: str = "<cell>") -> Problem:
    """A problem from source text (a notebook cell). Checks the syntax at once."""
    problem = Problem(name=name, source=source, origin=origin)
    try:
        compile(source, problem.filename, "exec")
    except SyntaxError as e:
        raise ProblemError(f"syntax error: {e.msg}", line=e.lineno,
                           source_name=_short(problem.filename),
                           hint=_line_hint(source, e.lineno)) from None
    return problem


def problem_from_objects(model_cls: type, get_inputs: Callable,
                         get_init_inputs: Callable | None = None) -> Problem:
    """A problem from live objects, with its source recovered by ``inspect``.

    The whole defining module's source is used when it defines all three; otherwise the pieces
    are stitched together with the imports and simple constants they use. When no source can be
    recovered, the problem refers to the objects by import path (so a worker process can import
    them), or, for objects defined in ``__main__``, holds them in this process only; ``notes``
    says which.
    """
    objs = {"Model": model_cls, "get_inputs": get_inputs,
            "get_init_inputs": get_init_inputs or (list)}
    module = sys.modules.get(getattr(model_cls, "__module__", ""), None)

    # 1. The defining module's own source, when it defines all three under our names.
    if module is not None and module.__name__ != "__main__" and all(
            getattr(module, n, None) is o for n, o in objs.items() if n != "get_init_inputs"
            or get_init_inputs is not None) and model_cls.__name__ == "Model":
        try:
            src = inspect.getsource(module)
            return Problem(name=module.__name__.rsplit(".", 1)[-1], source=src,
                           origin="<objects>", notes=[f"source of module {module.__name__}"])
        except (OSError, TypeError):
            pass

    # 2. Stitch the pieces' sources together.
    try:
        src = _stitch_sources(model_cls, get_inputs, get_init_inputs)
        problem = Problem(name=model_cls.__name__, source=src, origin="<objects>",
                          notes=["source recovered with inspect from the objects"])
        ns = problem.namespace()
        if all(n in ns for n in objs):
            return problem
    except Exception:  # noqa: BLE001, S110 - any failure falls through to the reference form
        pass

    # 3. By reference.
    refs: list[str] = []
    importable = True
    for name, obj in objs.items():
        mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
        if obj is objs["get_init_inputs"] and get_init_inputs is None:
            continue
        if not mod or mod == "__main__" or "<" in qual or "." in qual:
            importable = False
            break
        refs.append(f"from {mod} import {qual} as {name}")
    if importable:
        if get_init_inputs is None:
            refs.append("\n\ndef get_init_inputs():\n    return []")
        src = _REF_MARK + " (no source found)\n" + "\n".join(refs) + "\n"
        return Problem(name=model_cls.__name__, source=src, origin="<objects>",
                       notes=[("no source found: the problem imports the objects by reference, "
                               "so their module must be importable where it runs")],
                       _objects=objs)
    src = (_REF_MARK + f" (no source found; {model_cls.__qualname__} lives only in this "
           "process)\n")
    return Problem(name=model_cls.__name__, source=src, origin="<objects>",
                   notes=[("no source found and the objects are not importable: the problem "
                           "works in this process only; the isolated worker cannot run it. "
                           "Define it in a cell or a file instead")],
                   _objects=objs)


def _stitch_sources(model_cls: type, get_inputs: Callable,
                    get_init_inputs: Callable | None) -> str:
    parts: list[str] = []
    glb: dict[str, Any] = {}
    for obj, as_name in ((model_cls, "Model"), (get_inputs, "get_inputs"),
                         (get_init_inputs, "get_init_inputs")):
        if obj is None:
            parts.append("def get_init_inputs():\n    return []\n")
            continue
        src = textwrap.dedent(inspect.getsource(obj))
        if obj.__name__ != as_name:
            src += f"\n{as_name} = {obj.__name__}\n"
        parts.append(src)
        glb.update(getattr(obj, "__globals__", None) or
                   vars(sys.modules.get(obj.__module__, types.ModuleType("x"))))
    header = ["import math", "import torch", "import torch.nn as nn",
              "import torch.nn.functional as F"]
    body = "\n\n".join(parts)
    code = compile(body, "<stitch>", "exec")
    names = _co_names(code)
    for n in sorted(names):
        v = glb.get(n)
        if isinstance(v, types.ModuleType) and n not in ("math", "torch", "nn", "F"):
            header.append(f"import {v.__name__} as {n}" if v.__name__ != n else f"import {n}")
        elif isinstance(v, (bool, int, float, str, tuple)) and not n.startswith("__"):
            header.append(f"{n} = {v!r}")
    return "\n".join(header) + "\n\n\n" + body


def _co_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _co_names(c)
    return names


def _exec_module(source: str, filename: str, name: str) -> dict[str, Any]:
    mod_name = f"stitch_problem_{_ident(name)}_{os.getpid()}_{next(_counter)}"
    module = types.ModuleType(mod_name)
    module.__file__ = filename
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    sys.modules[mod_name] = module
    try:
        code = compile(source, filename, "exec")
        exec(code, module.__dict__)  # noqa: S102 - running the user's problem is the point
    except SyntaxError as e:
        sys.modules.pop(mod_name, None)
        raise ProblemError(f"syntax error: {e.msg}", line=e.lineno, source_name=_short(filename),
                           hint=_line_hint(source, e.lineno)) from None
    except ProblemError:
        sys.modules.pop(mod_name, None)
        raise
    except BaseException as e:
        sys.modules.pop(mod_name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _user_error("running the problem's module code raised", e, filename,
                          source) from None
    return module.__dict__


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40] or "p"


def _line_hint(source: str, line: int | None) -> str | None:
    if not line:
        return None
    lines = source.splitlines()
    if 0 < line <= len(lines):
        return f"line {line} reads: {lines[line - 1].strip()}"
    return None


def _user_error(what: str, exc: BaseException, filename: str, source: str) -> ProblemError:
    """A ProblemError naming the deepest line of the problem's source in ``exc``'s traceback."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    msg = f"{what} {type(exc).__name__}: {exc}"
    return ProblemError(msg, line=line, source_name=_short(filename),
                        hint=_line_hint(source, line))


def _short(filename: str) -> str:
    if filename.startswith("<stitch-problem "):
        return "<" + filename.split()[1] + ">"
    return filename


# ----------------------------------------------------------------------------- validating


def validate(problem: Problem, device: str = "cpu", seed: int = 42,
             timeout: float | None = None, time_forward: bool = True) -> ProblemReport:
    """Run the problem once and check the KernelBench contract; raise ProblemError if broken.

    With ``timeout`` (seconds) the run happens in a fresh Python process that is killed when
    time runs out, so a problem that loops forever at import or in ``forward`` cannot hang the
    caller. Without it the problem runs here.

    >>> validate(load_problem("examples/mlp.py"), timeout=60).parameters > 0  # doctest: +SKIP
    True
    """
    if timeout is not None:
        return _validate_in_subprocess(problem, device, seed, timeout, time_forward)
    return _validate_here(problem, device, seed, time_forward)


def _validate_here(problem: Problem, device: str, seed: int, time_forward: bool) -> ProblemReport:
    import torch

    fn, src = problem.filename, problem.source
    where = _short(fn)
    ns = problem.namespace()

    model_cls = ns.get("Model")
    if model_cls is None:
        raise ProblemError("the problem defines no `Model` class", source_name=where,
                           hint="define `class Model(torch.nn.Module)` with a forward method")
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise ProblemError(f"`Model` must be a torch.nn.Module subclass, got {model_cls!r}",
                           source_name=where, line=_def_line(src, "Model"))
    if not callable(ns.get("get_inputs")):
        raise ProblemError("the problem defines no `get_inputs()` function", source_name=where,
                           hint="define `def get_inputs(): return [torch.randn(...)]`")
    warnings: list[str] = []
    if "get_init_inputs" not in ns:
        warnings.append("no get_init_inputs(): Model() is built with no arguments")
    elif not callable(ns["get_init_inputs"]):
        raise ProblemError("`get_init_inputs` must be a function", source_name=where,
                           line=_def_line(src, "get_init_inputs"))

    # Init inputs and the model.
    try:
        init = ns.get("get_init_inputs", list)()
    except Exception as e:  # noqa: BLE001 - any user error
        raise _user_error("get_init_inputs() raised", e, fn, src) from None
    if not isinstance(init, (list, tuple)):
        raise ProblemError(f"get_init_inputs() must return a list, got {type(init).__name__}",
                           source_name=where, line=_def_line(src, "get_init_inputs"))
    try:
        model = problem.make_model(device, seed, ns=ns)
    except Exception as e:  # noqa: BLE001 - any user error
        raise _user_error("building Model(*get_init_inputs()) raised", e, fn, src) from None

    # Inputs.
    try:
        inputs = problem.make_inputs(device, seed, ns=ns)
    except Exception as e:  # noqa: BLE001 - any user error
        raise _user_error("get_inputs() raised", e, fn, src) from None
    gi_line = _def_line(src, "get_inputs")
    for i, x in enumerate(inputs):
        if isinstance(x, (torch.Tensor, bool, int, float)):
            continue
        raise ProblemError(f"get_inputs() item {i} is a {type(x).__name__}; items must be "
                           "tensors (ints and floats are allowed alongside)",
                           source_name=where, line=gi_line)
    if not any(isinstance(x, torch.Tensor) for x in inputs):
        raise ProblemError("get_inputs() returned no tensor", source_name=where, line=gi_line,
                           hint="return a list with at least one torch tensor")
    before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    # Forward, twice without reseeding: a fixed seed must give one answer.
    try:
        with torch.no_grad():
            out1 = model(*inputs)
    except Exception as e:  # noqa: BLE001 - any user error
        raise _user_error("Model.forward raised", e, fn, src) from None
    outs1 = _as_tensors(out1, where, src)
    if any(isinstance(b, torch.Tensor) and not torch.equal(b, x)
           for b, x in zip(before, inputs)):
        warnings.append("forward changes its inputs in place; candidates get fresh clones")
        inputs = [b.clone() if isinstance(b, torch.Tensor) else b for b in before]
    with torch.no_grad():
        outs2 = _as_tensors(model(*[x.clone() if isinstance(x, torch.Tensor) else x
                                    for x in before]), where, src)
    if not all(_same(a, b) for a, b in zip(outs1, outs2)):
        drop = [name or "(root)" for name, m in model.named_modules()
                if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.training and m.p > 0]
        if drop:
            raise ProblemError(
                f"the model is nondeterministic under a fixed seed: dropout in training mode "
                f"({', '.join(drop)})", source_name=where,
                hint="set p=0, call model.eval() in __init__, or drop the dropout")
        raise ProblemError("the model is nondeterministic under a fixed seed: two forward "
                           "calls on the same inputs gave different outputs", source_name=where,
                           hint="remove random ops (dropout, rand*) from forward")

    eager_ms = None
    if time_forward:
        runs = []
        with torch.no_grad():
            for _ in range(3):
                t0 = time.perf_counter()
                model(*inputs)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                runs.append((time.perf_counter() - t0) * 1e3)
        eager_ms = sorted(runs)[1]

    return ProblemReport(
        name=problem.name, device=device,
        input_shapes=[list(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs],
        input_dtypes=[str(x.dtype).replace("torch.", "") if isinstance(x, torch.Tensor)
                      else type(x).__name__ for x in inputs],
        output_shapes=[list(o.shape) for o in outs1],
        output_dtypes=[str(o.dtype).replace("torch.", "") for o in outs1],
        parameters=sum(p.numel() for p in model.parameters()),
        training=model.training, eager_ms=eager_ms, warnings=warnings + list(problem.notes))


def _as_tensors(out: Any, where: str, src: str) -> list:
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    kind = type(out).__name__
    if isinstance(out, (tuple, list)):
        kind += " containing " + ", ".join(sorted({type(o).__name__ for o in out})) \
            if out else " (empty)"
    raise ProblemError(f"Model.forward must return a tensor or a tuple of tensors, got {kind}",
                       source_name=where, line=_def_line(src, "forward"))


def _same(a, b) -> bool:
    import torch
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    return bool(torch.equal(a, b))


def _def_line(source: str, name: str) -> int | None:
    for i, line in enumerate(source.splitlines(), 1):
        s = line.strip()
        if s.startswith((f"def {name}(", f"class {name}(", f"class {name}:")):
            return i
    return None


def _validate_in_subprocess(problem: Problem, device: str, seed: int, timeout: float,
                            time_forward: bool) -> ProblemReport:
    if problem._objects is not None and "\nfrom " not in problem.source:
        return _validate_here(problem, device, seed, time_forward)
    job = json.dumps({"name": problem.name, "source": problem.source, "origin": problem.origin,
                      "notes": problem.notes, "device": device, "seed": seed,
                      "time_forward": time_forward})
    env = public_environ()
    try:
        proc = subprocess.run([sys.executable, "-m", "stitchcuda_lab.problem"], input=job,
                              capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        raise ProblemError(f"the problem {_short(problem.filename)} did not finish validating "
                           f"within {timeout:g} s (killed)",
                           source_name=_short(problem.filename),
                           hint="does it loop forever at import or in forward? make the "
                                "shapes smaller or raise the timeout") from None
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    try:
        reply = json.loads(last[0]) if last else None
    except json.JSONDecodeError:
        reply = None
    if reply is None:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ProblemError(f"validating the problem crashed its process: {tail[0]}",
                           source_name=_short(problem.filename))
    if "error" in reply:
        err = reply["error"]
        e = ProblemError(err["message"], hint=err.get("hint"))
        e.line, e.source_name = err.get("line"), err.get("source_name")
        raise e
    return ProblemReport(**reply["report"])


def _main() -> None:  # python -m stitchcuda_lab.problem: one validation job from stdin
    job = json.loads(sys.stdin.read())
    problem = Problem(name=job["name"], source=job["source"], origin=job["origin"],
                      notes=job["notes"])
    try:
        report = _validate_here(problem, job["device"], job["seed"], job["time_forward"])
        reply = {"report": report.to_dict()}
    except ProblemError as e:
        reply = {"error": {"message": str(e.message), "hint": e.hint, "line": e.line,
                           "source_name": e.source_name}}
    sys.stdout.write("\n" + json.dumps(reply) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    _main()
