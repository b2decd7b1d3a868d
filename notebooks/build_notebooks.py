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

POINTWISE_MODEL = '''\
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

NORM_MODEL = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """LayerNorm over each row, then GELU: a row reduction with an epilogue."""

    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return F.gelu(self.ln(x))

def get_inputs():
    return [torch.randn(256, 768)]

def get_init_inputs():
    return [768]'''

GEMM_MODEL = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """A linear layer and its epilogue: GELU(x @ W^T + b) * 0.5."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.gelu(self.fc(x)) * 0.5

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return [512, 512]'''

CLICK_OR_RUN = ("Click it in the panel, **or** run the next cell: it does the same, and does "
                "nothing if you clicked already (it reads the session's state).")
OR_RUN = ("Or run the next cell: it does the same, and does nothing if you did it already "
          "(it reads the session's state).")

APPROVE_PLAN = '''\
panel.wait()                          # a click of yours may still be working
if s.state.needs == "approve_plan":   # not approved yet: do what the button does
    panel.approve_plan()
    panel.wait()
print(s.state)'''

VERIFY_WAITING = '''\
panel.wait()
if s.state.needs == "approve_candidate":   # candidates wait: "Run next iteration" verifies them
    panel.next_iteration()
    panel.wait()
print(s.state)'''

FIND = '''

def find(path):
    """The path as given, else relative to this folder or the checkout's notebooks/."""
    import stitchcuda_lab
    p = Path(path)
    bases = [Path.cwd(), *Path.cwd().parents,
             Path(stitchcuda_lab.__file__).resolve().parents[1] / "notebooks"]
    for base in bases:
        if (base / p).exists():
            return base / p
    raise FileNotFoundError(f"{path} not found from {Path.cwd()}")'''


APPROVE_THEN_VERIFY = APPROVE_PLAN.rsplit("\n", 1)[0] + "\n\n" + VERIFY_WAITING


def _nb(cells: list, title: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=cells, metadata={
        # the name JupyterLab gives ipykernel's spec: another one marks the notebook changed
        # as soon as it is opened
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                       "name": "python3"},
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
# 01 · Quickstart: a faster program for a chain of pointwise ops

`%%stitch` takes a cell that defines a PyTorch model in the KernelBench form (`Model`,
`get_inputs`, `get_init_inputs`) and starts a **Planner → Coder → Verifier** session on it.
The session stops whenever it needs you and shows a panel:

* **Plan**: the Planner's todo list (which ops to fuse, how, and why); approve it.
* **Kernels**: the generated kernels in a code editor; edit them, approve.
* **Profile**: the Verifier's verdict, the timelines of the reference and the candidate.
* **History**: every version, speedup per iteration, *Run next iteration*, *Stop and export*.

The line under the panel's title always says what you can do next. The offline agents need no
network and no GPU: without one, the same loop writes C kernels for the CPU.
"""),
        _params(),
        code(SETUP),
        md("""
The model: five elementwise ops, each a pass over memory in eager PyTorch. `-o s` keeps the
Session in `s` and `--panel panel` the panel in `panel` (the `%timeit -o` convention). The
magic plans, shows the panel and returns at once: it never waits for a click.
"""),
        code("%%stitch --device {device} --agent {agent} --iters {iters} -o s --panel panel\n"
             + POINTWISE_MODEL),
        md("**Approve the plan** (one fused kernel for the whole chain). " + CLICK_OR_RUN),
        code(APPROVE_PLAN),
        md("**Verify the candidate**: *Approve* in Kernels, or *Run next iteration* in "
           "History. " + CLICK_OR_RUN),
        code(VERIFY_WAITING),
        md("""
The best candidate and its verdict: correctness over seeded trials, max errors, and the
speedup over eager PyTorch (and torch.compile when `compile_modes` asks for it). A candidate
the Verifier did not pass is never the result. On a busy machine (a laptop, a shared CPU)
a speedup can be timed while the load moves: the panel marks it ‡, says so under the History
table, and ranks it below every verdict timed under a steady load, however large it is (the
session judges such a candidate once more before it would lead).
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
# 02 · Human in the loop: edit a kernel, watch the Verifier, resume after a restart

Every candidate is verified before anyone trusts it, your edits included: fresh seeded inputs,
output memory poisoned beforehand, tolerances per dtype, determinism and input checks. The
model here is a normalisation (LayerNorm, then GELU): each row is reduced, then scaled.

You will make a slip in the kernel, see the verdict say **incorrect**, fix it, see a compile
error on its line, let the Coder refine *your* kernel, then restart the kernel and carry on
where you stopped.
"""),
        _params(),
        code(SETUP),
        code("%%stitch --device {device} --agent {agent} --iters {iters} -o s --panel panel\n"
             + NORM_MODEL),
        md("**Approve the plan, then verify the first candidate.** " + CLICK_OR_RUN),
        code(APPROVE_THEN_VERIFY),
        md("""
Open **Kernels**. The editor has line numbers, C/CUDA highlighting and no spellcheck; the diff
against the version a candidate came from is shown inline. **Make a slip**: add `+ 1.0f` to the
value the kernel stores last, then press **Approve edit** (*Approve* turns into it as soon as
you type; what you typed is kept until it is verified or you press *Discard edits*).
""" + OR_RUN),
        code('''
import re

from stitchcuda_lab.jupyter import bridge

STORE = re.compile(r"(\\w+\\s*\\[[^\\]]+\\]\\s*=\\s*)([^;]+);")

def break_kernel(code):
    """Add 1 to the last value the kernel stores: a typical off-by-something slip."""
    m = list(STORE.finditer(code))[-1]
    return code[:m.start()] + f"{m.group(1)}({m.group(2)}) + 1.0f;" + code[m.end():]

def fix_kernel(code):
    return re.sub(r"\\) \\+ 1\\.0f;", ");", code)

def your_edits():
    return [c for c in bridge.candidates(s) if c.origin == "user"]

panel.wait()
if not your_edits():                  # you did not edit in the panel: type the slip for you
    first = s.best()[0] if s.best() else panel.selected()
    panel.select(first.id)
    k = first.kernels[0]
    panel.edit_kernel(k.name, break_kernel(k.code))
    panel.approve_candidate()         # with an edit this is "Approve edit"
    panel.wait()
def status(c):
    v = s.state.verdicts.get(c.id)
    return v.status if v else None

edit = next((c for c in your_edits() if status(c) == "incorrect"), your_edits()[-1])
verdict = s.state.verdicts.get(edit.id)
print(f"your edit {edit.id} (of {edit.parent}):", verdict.summary() if verdict else "not verified")
verdict'''),
        md("""
The Verifier compared against eager PyTorch on fresh inputs: a slip shows as **incorrect** with
the per-trial errors (Profile tab). Your edit became a version of its own, under the candidate
you edited (History draws the tree). **Fix it** in the editor and press *Approve edit* again.
""" + OR_RUN),
        code('''
panel.wait()
if not [c for c in your_edits() if status(c) == "pass"]:   # not fixed in the panel yet
    last = your_edits()[-1]
    panel.select(last.id)
    k = last.kernels[0]
    panel.edit_kernel(k.name, fix_kernel(k.code))
    panel.approve_candidate()
    panel.wait()
fixed = ([c for c in your_edits() if status(c) == "pass"] or your_edits())[-1]
print(f"{fixed.id} (edit of {fixed.parent}):", s.state.verdicts[fixed.id].summary())'''),
        md("""
**A compile error is marked on its line.** Delete a `;` in the editor and *Approve edit*: the
verdict is `build_error`, the compiler's message sits on the line it names (the line numbers
are the editor's) and the compile log under the editor opens. The next cell prints the
messages as data: of your broken edit when you made one, else of a copy of your fixed version
with its last `;` deleted.
"""),
        code('''
from stitchcuda_lab.jupyter import diagnostics

panel.wait()
k = fixed.kernels[0]
yours = [c for c in your_edits() if status(c) == "build_error"]
if yours:                           # you broke one in the panel: read its messages
    broken = yours[-1]
else:
    at = k.code.rindex(";")
    broken = bridge.edited(fixed, {k.name: k.code[:at] + k.code[at + 1:]})
if broken.id not in s.state.candidates and s.state.needs in ("next", "approve_candidate"):
    bridge.post_edited(s, broken)   # what Approve edit posts
    s.advance()
    panel.refresh()
v = s.state.verdicts.get(broken.id)
if v is not None:
    print(v.status)
    for d in diagnostics.parse(v.build_log, [k.name]):
        print(d, "|", broken.kernels[0].code.splitlines()[d.line - 1].strip())'''),
        md("""
## Resume after a kernel restart

Everything the session did is in its folder (`events.jsonl`, each event written before it takes
effect). Restart the kernel now (**Kernel ▸ Restart Kernel**), run the first two code cells
again (parameters and setup: they only set options), then the cells below: `%stitch_open`
replays the events and the panel comes back where you were, your versions and their verdicts
included. The rest of the notebook carries on with the reopened session.
"""),
        code('''
if "s" in globals():   # no restart happened (Run All, papermill): let go as a restart would
    %stitch_close {s.id}'''),
        code("%stitch_open -o s --panel panel"),
        code('''
from stitchcuda_lab.jupyter import bridge

fixed = [c for c in bridge.candidates(s) if c.origin == "user"
         and s.state.verdicts.get(c.id) and s.state.verdicts[c.id].status == "pass"][-1]
print(s.state)
print("versions:", len(s.state.candidates), "· verdicts:", len(s.state.verdicts),
      "· your passing edit:", fixed.id)'''),
        md("""
**Refine builds on what you approved.** Press *Run next iteration*: the Coder refines *your*
fixed kernel, the newest version of yours that passed. The offline Coder varies what it can
around a hand edit and keeps every line you wrote (on a GPU: block size, rows per block, items
per thread, the grid; on the CPU: chunk sizes of pointwise kernels), or says plainly that it
cannot: for this row kernel on the CPU its only variant would drop your kernel, so the session
finishes with that reason, and your edit stays a verified version (the result is still the
fastest version that passed). An LLM Coder gets your code as its
starting point.
""" + OR_RUN),
        code('''
panel.wait()
if s.state.needs == "next" and s.state.iteration < iters:
    panel.select(fixed.id)
    panel.next_iteration()
    panel.wait()
for c in bridge.candidates(s):
    if c.params.get("hand_edit"):
        v = s.state.verdicts.get(c.id)
        print(c.id, "·", c.notes.splitlines()[-1], "·", v.summary() if v else "not verified")
print(s.state.message or s.state)'''),
    ], "Human in the loop")


def reading_profiles() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 03 · Reading profiles: a GEMM and its epilogue

The model is a linear layer followed by GELU and a scale. The Planner keeps the GEMM in the
library (it runs near the machine's peak there) and fuses the epilogue into one kernel, so the
candidate reads the GEMM's output once instead of once per op.

The Verifier profiles the reference and the candidate. Each timeline row is
`{lane, name, start_us, dur_us, cat}`: lanes are CPU threads and GPU streams; categories are
`cpu_op` (a PyTorch operator), `kernel` (device work), `user_annotation` (the `stitch::` range
around the candidate's own kernel call; on the CPU that is the C kernel itself) and
`cuda_runtime` (launch calls).
"""),
        _params(),
        code(SETUP + "\n%config StitchMagics.profile = True"),
        code("%%stitch --device {device} --agent {agent} --iters {iters} -o s --panel panel\n"
             + GEMM_MODEL),
        md("**Approve the plan and verify the candidate.** " + CLICK_OR_RUN),
        code("from stitchcuda_lab.jupyter import figures\n\n" + APPROVE_THEN_VERIFY + '''

candidate, verdict = s.best() or (None, s.state.last_verdict())
profile = verdict.profile if verdict is not None else {}
print(verdict.summary() if verdict is not None else "no verdict yet")'''),
        md("""
**Timeline.** Each side starts at 0 µs. The top lane of each side, *timed median*, is the
verdict's own time for that side (the median of the timed forwards); the lanes below are one
traced forward. When the traced bars are much longer or shorter than the timed median, the
trace is not what the verdict measured (the panel says so above the chart): read the speedup
from the verdict and the trace for the shape of the work. Hatched *gap* bars are stretches
where a lane runs nothing: the host between ops, a GPU waiting for launches.
"""),
        code('''
# each side's traced forward against its timed median (the panel's line above its chart)
for side, a in figures.agreement(profile, verdict.timings).items():
    print(f"{side:>9}: traced {a['traced_us']:8.0f} us, timed median {a['timed_us']:8.0f} us "
          f"({a['ratio'] - 1:+.0%})")
figures.timeline_figure(profile, timings=verdict.timings)'''),
        md("""
**Time per kernel**, with the work each one does: the GEMM's FLOPs come from the captured
graph; the fused epilogue's minimum bytes are what it reads from outside and what it writes.
Achieved FLOP/s and bytes/s show which roof each kernel is near (the percentage of the
machine's ceiling appears when the run names its ceilings).
"""),
        code('''
from IPython.display import HTML

work = figures.kernel_work(s.graph, s.state.plan, candidate)
HTML(figures.kernel_table_html(profile, work=work, ceilings=figures.ceilings(profile)))'''),
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

rows = pd.DataFrame(figures.timeline_rows(profile).get("candidate") or [])
(rows.sort_values("dur_us", ascending=False).head(10) if len(rows)
 else "this verdict holds no timeline rows (profiling was off, or nothing passed)")'''),
        md("And the speedup per iteration, as the panel's History tab draws it:"),
        code('''
from stitchcuda_lab.jupyter import bridge

figures.history_figure(bridge.history(s))'''),
    ], "Reading profiles")


def claude_agent() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 04 · The Claude agent, replayed from a recorded session

With `agent = "claude"` the Planner and Coder are Claude: its prompts carry the model source,
the graph summary, the eager profile, retrieved knowledge-base sections and the Verifier's
feedback. The contracts are the offline agents', and so is the Verifier: a Claude candidate is
trusted only after it passes.

The problem is a KernelBench-form file, `models/bias_gelu_scale.py` (bias add, tanh-GELU,
scale). By default the agents answer from `recordings/claude_bias_gelu_scale.jsonl`, a
recorded session: no network, no key. It was recorded through the real Anthropic SDK against
scripted replies in Claude's tool-call format (`recordings/record_claude.py` says how), not
from a live Claude. With `ANTHROPIC_API_KEY` set and `replay = False` the same cells call
Claude (`pip install 'stitchcuda-lab[llm]'`).
"""),
        _params('replay = True            # False: call Claude (needs ANTHROPIC_API_KEY)\n'
                'recording = "recordings/claude_bias_gelu_scale.jsonl"\n'
                'problem_path = "models/bias_gelu_scale.py"\n',
                base=COMMON_PARAMS.replace(
                    'agent = "offline"        # offline (no network) | claude | openai | hybrid',
                    'agent = "claude"         # claude | hybrid (offline first, Claude refines)')),
        code('''
import os
from pathlib import Path''' + FIND + '''


if not replay and not os.environ.get("ANTHROPIC_API_KEY"):
    print("ANTHROPIC_API_KEY is not set: replaying the recorded session instead.")
    replay = True
print("agents:", f"replayed from {recording}" if replay else f"{agent}, live")'''),
        code('''
from stitchcuda_lab import Session, Settings, load_problem
from stitchcuda_lab.agents.llm import make_replay_agents
from stitchcuda_lab.jupyter import SessionPanel

settings = Settings.from_env(device=device, agent=agent, iters=iters,
                             compile_modes=compile_modes, timing_trials=timing_trials,
                             sessions_dir=sessions_dir)
planner, coder = make_replay_agents(find(recording)) if replay else (None, None)
s = Session.create(load_problem(find(problem_path)), settings, agent=agent,
                   planner=planner, coder=coder)
panel = SessionPanel(s, names={"session": "s", "panel": "panel"})
panel.advance()                       # the Planner runs; the panel shows its plan
panel'''),
        md("**Approve the plan and verify Claude's first kernel.** " + CLICK_OR_RUN),
        code(APPROVE_THEN_VERIFY),
        md("""
In the recording the first kernel uses the wrong GELU form, and the Verifier says
**incorrect**. **Run next iteration**: Claude gets the Verifier's feedback (the status, the
mismatching elements, its own previous kernel) and answers with a fix.
""" + OR_RUN),
        code('''
panel.wait()
if s.state.needs == "next" and s.state.iteration < iters:
    panel.next_iteration()
    panel.wait()
for c in s.state.candidates.values():
    v = s.state.verdicts.get(c.id)
    print(c.id, "iteration", c.iteration, c.origin, "->", v.summary() if v else "not verified")'''),
        md("""
Every exchange is in the session log (`s.records()`, kind `llm_exchange`), so a session can be
replayed, like this one, or exported as training trajectories.
"""),
        code('''
exchanges = [r.payload for r in s.records() if r.kind == "llm_exchange"]
print(len(exchanges), "LLM exchange(s):", [(e["role"], e.get("iteration")) for e in exchanges])
fix = next((e for e in exchanges if e["role"] == "coder" and e.get("iteration") == 1), None)
if fix is not None:
    user = fix["prompt"]["user"]
    print(user[user.find("Iteration 1"):][:300])
best = s.best()
print("best:", best[1].summary() if best else "no candidate passed")'''),
    ], "Claude agent")


def model_from_file() -> nbformat.NotebookNode:
    return _nb([
        md("""
# 05 · A model from a file: a small CNN block

Any file in the KernelBench form works: `examples/*.py`, a KernelBench problem, your own model.
This one is `models/conv_block.py`: a 3x3 convolution, batch norm, ReLU and a max-pool. The
Planner keeps the convolution in the library, fuses batch norm and ReLU into its epilogue and
writes the max-pool as a pooling kernel of its own; what it leaves to PyTorch (a view, the
batch norm's in-place counter update) is listed with its reason.

This notebook uses the Python API (`load_problem`, `Session`, `SessionPanel`) instead of the
magic; the panel is the same. `shrink` rewrites module-level size constants to keep it small.
"""),
        _params('problem_path = "models/conv_block.py"   # relative to notebooks/, or any path\n'
                'shrink = {"BATCH": 4, "SIZE": 16}     # {} keeps the file\'s own sizes\n'),
        code('''
import re
from pathlib import Path

from stitchcuda_lab import Session, Settings, load_problem, problem_from_source
from stitchcuda_lab.jupyter import SessionPanel''' + FIND + '''


path = find(problem_path)
source = load_problem(path).source
for name, value in shrink.items():
    source = re.sub(rf"^{name}\\s*=.*$", f"{name} = {value!r}", source, flags=re.MULTILINE)
problem = problem_from_source(source, name=path.stem, origin=str(path))
print(problem)'''),
        code('''
settings = Settings.from_env(device=device, agent=agent, iters=iters,
                             compile_modes=compile_modes, timing_trials=timing_trials,
                             sessions_dir=sessions_dir)
s = Session.create(problem, settings)
panel = SessionPanel(s, names={"session": "s", "panel": "panel"})
panel.advance()                       # the Planner runs; the panel shows its plan
panel'''),
        md("**Approve the plan and verify the candidate.** " + CLICK_OR_RUN + """

The panel's summary says which candidate is best and why; when a candidate is slower than
eager PyTorch (small convolutions on a CPU often are) it says that keeping the reference is
the honest result."""),
        code(APPROVE_THEN_VERIFY),
        code('''
best = s.best()
if best:
    display(best[1])
    out = s.export("exported_" + path.stem)
    print("exported to", out)
else:
    print("nothing passed yet: approve in the panel above")'''),
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
