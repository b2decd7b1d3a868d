"""Write the tutorial notebooks from code, so they stay reproducible and reviewable.

    python notebooks/build_notebooks.py            # rewrites notebooks/*.ipynb
    python notebooks/build_notebooks.py --check    # exit 1 if a notebook differs from this file

Each notebook's first code cell is tagged ``parameters`` (papermill injects values after it);
defaults are tiny CPU shapes with ``device = "auto"`` so every notebook runs headless in CI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

# Shared parameters: small and fast by default; change them to taste.
COMMON_PARAMS = '''\
device = "auto"          # auto: the GPU when there is one, else the CPU
agent = "offline"        # offline (no network) | claude | openai | hybrid
iters = 1                # refine iterations after the first candidate
compile_modes = ""       # "default" also times torch.compile (slower: it compiles)
timing_trials = 5        # timed runs per candidate (median reported)
sessions_dir = "stitch_sessions"
'''

SETUP = '''\
%load_ext stitchcuda_lab
%config StitchMagics.compile_modes = {compile_modes!r}
%config StitchMagics.timing_trials = {timing_trials}
%config StitchMagics.sessions_dir = {sessions_dir!r}'''

SMALL_MODEL = '''\
import torch
import torch.nn as nn

class Model(nn.Module):
    """x * scale + bias, then SiLU, then tanh: a chain of memory-bound elementwise ops."""

    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = x * self.scale + self.bias
        y = torch.sigmoid(y) * y
        return torch.tanh(y)

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return [512, 1.7]'''


def _nb(cells: list, title: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "title": title,
    })
    for i, c in enumerate(nb.cells):
        c["id"] = f"cell-{i:02d}"   # stable ids: regenerating gives the same file
    return nb


def _params(extra: str = "", base: str = COMMON_PARAMS) -> nbformat.NotebookNode:
    cell = new_code_cell(base + extra)
    cell.metadata["tags"] = ["parameters"]
    return cell


def md(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return new_code_cell(text.strip())


def quickstart() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 01 · Quickstart: a faster program for a small model

`%%stitch` takes a cell that defines a PyTorch model in the KernelBench form (`Model`,
`get_inputs`, `get_init_inputs`) and starts a **Planner → Coder → Verifier** session on it.
The session stops whenever it needs you and shows a panel:

* **Plan**: the Planner's todo list (which ops to fuse, how, and why); approve it.
* **Kernels**: the generated kernels; edit them, verify your edit, approve.
* **Profile**: the Verifier's verdict and timelines of the reference and the candidate.
* **History**: speedup per iteration, *Run next iteration*, *Stop and export*.

The offline agents need no network and no GPU: on a machine without one, the same loop writes
C kernels for the CPU.
"""),
        _params('drive = True            # True: the cells below click for you (headless runs)\n'),
        code(SETUP),
        md("""
The model cell. `-o s` keeps the Session in `s`; the magic plans, shows the panel and returns at
once (it never waits for a click).
"""),
        code("%%stitch --device {device} --agent {agent} --iters {iters} -o s\n" + SMALL_MODEL),
        md("""
In the panel, press **Approve plan**, then **Run next iteration** (it approves the candidate and
verifies it). With `drive = True` the next cells do exactly that from code, which is also how
this notebook runs headless.
"""),
        code('''
if drive and s.state.needs == "approve_plan":
    %stitch_approve
display(s.state.plan)'''),
        code('''
if drive and s.state.needs == "approve_candidate":
    %stitch_approve
else:
    print(s.state)'''),
        md("""
The best candidate and its verdict: correctness over 5 seeded trials, max errors, and the
speedup over eager PyTorch (and torch.compile when `compile_modes` asks for it).
"""),
        code('''
best = s.best()
if best is None:
    print("no verified candidate yet: approve the plan and the candidate in the panel above")
else:
    candidate, verdict = best
    display(verdict)
    print(candidate)'''),
        md("The finished model is a `torch.nn.Module` you can use like the original:"),
        code('''
import torch

if best is not None:
    model_new = s.model()
    x = get_inputs()[0]
    torch.manual_seed(42)
    reference = Model(*get_init_inputs())
    print("max abs difference:", (model_new(x) - reference(x)).abs().max().item())'''),
        md("Export a standalone KernelBench-style file (`ModelNew` plus its kernels):"),
        code('''
if best is not None:
    %stitch_export {s.id} exported_quickstart
    print(sorted(p.name for p in __import__("pathlib").Path("exported_quickstart").iterdir()))'''),
    ], "Quickstart")


def human_in_the_loop() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 02 · Human in the loop: edit a kernel, watch the Verifier catch a mistake

Every candidate is verified before anyone trusts it: fresh seeded inputs, output memory poisoned
beforehand, tolerances per dtype, determinism and input-mutation checks. Here we break a kernel
on purpose, see the verdict say **incorrect**, then fix it.
"""),
        _params(),
        code(SETUP),
        code("%%stitch --device {device} --agent {agent} --iters {iters} -o s\n" + SMALL_MODEL),
        md("""
Approve the plan and the first candidate (the same as the panel's buttons), then open the
panel over the session again: it is only a view, so any number of panels can show one session.
"""),
        code('''
from stitchcuda_lab.jupyter import SessionPanel

%stitch_approve
%stitch_approve
panel = SessionPanel(s, threaded=False)   # threaded=False: each click finishes before returning
panel'''),
        md("""
The kernel as the Coder wrote it (the whole text is in the panel's **Kernels** tab).
`break_kernel` adds 1 to the last value the kernel stores, a typical off-by-something slip.
"""),
        code('''
import re

candidate = panel.selected()
kernel = candidate.kernels[0]
print("\\n".join(kernel.code.splitlines()[-25:]))    # the end: where the kernel stores its output

STORE = re.compile(r"(\\w+\\s*\\[[^\\]]+\\]\\s*=\\s*)([^;]+);")

def break_kernel(code):
    m = list(STORE.finditer(code))[-1]          # the last store: the kernel's output
    return code[:m.start()] + f"{m.group(1)}({m.group(2)}) + 1.0f;" + code[m.end():]

def fix_kernel(code):
    return re.sub(r"\\) \\+ 1\\.0f;", ");", code)'''),
        md("Type the wrong edit into the editor (here from code) and press **Verify edit**:"),
        code('''
panel.edit_kernel(kernel.name, break_kernel(kernel.code))
panel.verify_edit()
wrong = panel.selected()
verdict = s.state.verdicts[wrong.id]
assert verdict.status == "incorrect", verdict
verdict'''),
        md("""
The Verifier compared against eager PyTorch on fresh inputs and rejected the edit (see the
per-trial table and the max error in the panel's **Profile** tab). The diff in **Kernels**
shows what changed. Now fix it and verify again:
"""),
        code('''
panel.edit_kernel(kernel.name, fix_kernel(wrong.kernels[0].code))
panel.verify_edit()
fixed = panel.selected()
assert s.state.verdicts[fixed.id].status == "pass", s.state.verdicts[fixed.id]
print(fixed, "->", s.state.verdicts[fixed.id].summary())
print("parent chain:", fixed.parent, "<-", wrong.parent)'''),
        md("Every version stays in the session log; the **History** tab lists them all."),
        code("panel.tabs.selected_index = 3\npanel"),
    ], "Human in the loop")


def reading_profiles() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 03 · Reading profiles: timelines and per-kernel time

The Verifier profiles the reference and the candidate in the same run. Each timeline row is
`{lane, name, start_us, dur_us, cat}`: lanes are CPU threads and GPU streams, categories are
`cpu_op` (a PyTorch operator on the host), `kernel` (device work), `cuda_runtime` (launch calls)
and so on. Both sides start at 0 µs on one axis, so their lengths compare directly.
"""),
        _params(),
        code(SETUP + "\n%config StitchMagics.profile = True"),
        code("%%stitch --device {device} --agent {agent} --iters {iters} --auto -o s\n"
             + SMALL_MODEL),
        code('''
from stitchcuda_lab.jupyter import figures

candidate, verdict = s.best() or (None, s.state.last_verdict())
profile = verdict.profile
print(verdict.summary())
print({side: len(profile.get(side) or []) for side in ("reference", "candidate")}, "rows")'''),
        md("""
**Timeline.** On the reference you see one operator (and on a GPU one kernel) per elementwise
op; the candidate runs one fused kernel. Gaps between bars on a GPU lane are launch overhead.
"""),
        code("figures.timeline_figure(profile)"),
        md("**Time per kernel** (or per operator on the CPU), summed over the profiled run:"),
        code("figures.kernel_figure(profile)"),
        md("""
**Hardware counters.** With `ncu` on (GPU only, slow) the Verifier adds Nsight Compute's DRAM
and SM throughput per kernel: a memory-bound kernel near the DRAM roof is done; one far below
both roofs has a problem (uncoalesced access, too little parallelism).
"""),
        code('''
fig = figures.ncu_figure(profile.get("ncu"))
fig if fig is not None else print(figures.ncu_note(profile.get("ncu"), verdict.device))'''),
        md("The rows are plain data, ready for pandas:"),
        code('''
import pandas as pd

rows = figures.timeline_rows(profile)
pd.DataFrame(rows["candidate"]).sort_values("dur_us", ascending=False).head(10)'''),
        md("And the speedup per iteration, as the panel's History tab draws it:"),
        code('''
from stitchcuda_lab.jupyter import bridge

figures.history_figure(bridge.history(s))'''),
    ], "Reading profiles")


def claude_agent() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 04 · The Claude agent

With `agent = "claude"` the Planner and Coder are Claude: its prompts carry the model source,
the graph summary, the eager profile, retrieved knowledge-base sections and the Verifier's
feedback. The contracts are the same as the offline agents', and so is the Verifier: a Claude
candidate is trusted only after it passes.

This needs `ANTHROPIC_API_KEY` in the kernel's environment (and `pip install
'stitchcuda-lab[llm]'`). Without a key the notebook says so and runs the offline agent, so it
still runs end to end.
"""),
        _params(base=COMMON_PARAMS.replace(
            'agent = "offline"        # offline (no network) | claude | openai | hybrid',
            'agent = "claude"         # falls back to "offline" when there is no API key')),
        code('''
import os

if agent in ("claude", "hybrid") and not os.environ.get("ANTHROPIC_API_KEY"):
    print("ANTHROPIC_API_KEY is not set: running the offline agent instead. "
          "Set the key (and restart the kernel) to use Claude.")
    agent = "offline"
print("agent:", agent)'''),
        code(SETUP),
        code("%%stitch --device {device} --agent {agent} --iters {iters} --auto -o s\n"
             + SMALL_MODEL),
        md("""
What the agent proposed and what the Verifier said. With Claude, every exchange is in the
session log (`s.records()`, kind `llm_exchange`), so a session can be replayed or exported as
training data.
"""),
        code('''
display(s.state.plan)
best = s.best()
print(best[1].summary() if best else "no candidate passed")
exchanges = [r for r in s.records() if r.kind == "llm_exchange"]
print(len(exchanges), "LLM exchange(s) recorded")'''),
    ], "Claude agent")


def model_from_file() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 05 · A model from a file

Any file in the KernelBench form works: `examples/*.py`, a KernelBench problem, your own model.
This notebook uses the Python API (`load_problem`, `Session`) instead of the magic; the panel is
the same. `shrink` rewrites module-level size constants so the example stays small on a CPU.
"""),
        _params('problem_path = "examples/pointwise_chain.py"   # relative to the repository, '
                'or any path\nshrink = {"ROWS": 256, "COLS": 512}     # {} keeps the file\'s '
                'own sizes\nauto = True\n'),
        code('''
import re
from pathlib import Path

from stitchcuda_lab import Session, Settings, load_problem, problem_from_source
from stitchcuda_lab.jupyter import SessionPanel


def find(path):
    """The path as given, else relative to the repository this notebook lives in."""
    p = Path(path)
    for base in (Path.cwd(), *Path.cwd().parents):
        if (base / p).exists():
            return base / p
    raise FileNotFoundError(f"{path} not found from {Path.cwd()}")

path = find(problem_path)
problem = load_problem(path)
source = problem.source
for name, value in shrink.items():
    source = re.sub(rf"^{name}\\s*=.*$", f"{name} = {value!r}", source, flags=re.MULTILINE)
problem = problem_from_source(source, name=path.stem, origin=str(path))
print(problem)
print(source.split('"""')[1].strip() if source.startswith('"""') else "")'''),
        code('''
settings = Settings.from_env(device=device, agent=agent, iters=iters,
                             compile_modes=compile_modes, timing_trials=timing_trials,
                             sessions_dir=sessions_dir)
s = Session.create(problem, settings)
panel = SessionPanel(s, threaded=False)
panel'''),
        md("""
`s.advance()` runs until a person is needed (the plan); `s.advance(auto=True)` runs the whole
loop. `panel.refresh()` redraws the panel from the session.
"""),
        code('''
s.advance(auto=auto)
panel.refresh()
print(s.state)'''),
        code('''
best = s.best()
if best:
    display(best[1])
    out = s.export("exported_" + path.stem)
    print("exported to", out)'''),
    ], "Model from file")


NOTEBOOKS = {
    "01_quickstart.ipynb": quickstart,
    "02_human_in_the_loop.ipynb": human_in_the_loop,
    "03_reading_profiles.ipynb": reading_profiles,
    "04_claude_agent.ipynb": claude_agent,
    "05_model_from_file.ipynb": model_from_file,
}


def build(out_dir: Path = HERE) -> dict[str, str]:
    """Every tutorial as notebook JSON text, keyed by file name."""
    out = {}
    for name, make in NOTEBOOKS.items():
        nb = make()
        nbformat.validate(nb)
        out[name] = nbformat.writes(nb) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check the files are up to date")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    stale = []
    for name, text in build().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print("wrote", path)
    if stale:
        print("out of date (run python notebooks/build_notebooks.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
