"""Write docs/RELIABILITY.md's table from a pytest JUnit XML run (see the command in the doc).

    python tests/reliability/table.py RUN.xml "COMMAND" > docs/RELIABILITY.md

Adversarial rows come from the candidates' headers (first docstring line, expected verdict);
fault and security rows from FAULTS below. Each row's result is what the test asserts plus the
outcome this run recorded (passed, failed, or skipped with its reason).
"""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
ADV = ROOT / "tests" / "adversarial"

# (pattern or fault, test id, what the test asserts)
FAULTS = [
    ('kill -9 of `stitchcuda-lab optimize` mid-verification, then `resume`',
     'tests/reliability/test_cli_faults.py::test_kill_9_of_optimize_mid_iteration_then_resume_loses_nothing',
     ('listed as interrupted; resume exits 0 and finishes; events before the kill are an '
      'unchanged prefix of the events after; seqs gapless; plan not redone; the orphaned worker'
      ' exits')),
    ('kill -9 of a Session mid-verification (in-process fakes)',
     'tests/test_session.py::test_a_session_killed_mid_verification_reopens_and_carries_on',
     'reopens, nothing already recorded is redone, finishes'),
    ('kill -9 in the middle of an event write',
     'tests/test_store.py::test_sigkill_mid_write_keeps_earlier_events_and_the_session_resumes',
     'a gapless prefix of events survives; appending works again'),
    ('two processes building the same kernel at once',
     'tests/reliability/test_concurrent_build.py::test_two_processes_building_one_kernel_compile_once_and_both_load_it',
     'one compile in all, both processes load and run it, one .so, no temp files'),
    ('threads building the same kernel at once',
     'tests/runtime/test_cache.py::test_concurrent_builders_of_one_key_build_once',
     'one build, one artifact'),
    ('disk fills during a session artifact write (64 KiB tmpfs)',
     'tests/reliability/test_disk_full.py::test_session_artifact_write_on_a_full_disk_is_a_store_error_and_keeps_earlier_events',
     ("StoreError 'No space left on device' with a hint; earlier events intact; no temp file; "
      'appends resume once space is freed')),
    ('disk fills in the middle of an event line',
     'tests/reliability/test_disk_full.py::test_an_event_line_cut_by_a_full_disk_is_undone_so_the_next_event_survives',
     'StoreError; the cut line is truncated away, so the next event is readable (was lost)'),
    ('disk full when a session is created',
     'tests/reliability/test_disk_full.py::test_session_create_on_a_full_disk_is_a_store_error',
     'StoreError, not a bare OSError'),
    ('disk fills during a kernel cache write',
     'tests/reliability/test_disk_full.py::test_cache_write_on_a_full_disk_is_a_store_error_and_leaves_no_entry',
     ('StoreError naming STITCH_CACHE in its hint; no half entry; older entry intact; builds '
      'once space is freed')),
    ('corrupted cache entry (garbage bytes)',
     'tests/runtime/test_cache.py::test_corrupted_entry_is_detected_and_rebuilt',
     'hash mismatch detected, rebuilt, runs correctly'),
    ('cache entry without metadata (builder died)',
     'tests/runtime/test_cache.py::test_entry_without_metadata_is_a_miss',
     'a miss, rebuilt'),
    ('truncated session log line (through the CLI)',
     'tests/reliability/test_cli_faults.py::test_a_truncated_session_log_line_still_opens_and_resumes',
     ('`sessions show` opens it (interrupted); `resume` finishes; the torn tail is set aside; '
      'earlier events unchanged')),
    ('torn last line (a crash mid-write)',
     'tests/test_store.py::test_a_torn_last_line_is_skipped_with_a_warning_and_nothing_earlier_is_lost',
     'skipped with a warning, nothing earlier lost'),
    ('corrupt middle line',
     'tests/test_store.py::test_a_corrupt_middle_line_is_skipped_and_later_lines_kept',
     'skipped, later lines kept'),
    ('worker crashes (segfault)',
     'tests/verifier/test_worker.py::test_segfault_is_a_runtime_error_and_the_next_verification_passes',
     'runtime_error crash (SIGSEGV) with the fault log; a fresh worker passes the next'),
    ('worker hangs',
     'tests/verifier/test_worker.py::test_hang_is_killed_as_timeout_and_the_next_verification_passes',
     'timeout within the limit; the process is gone; the next passes'),
    ('worker runs out of memory',
     'tests/verifier/test_worker.py::test_memory_exhaustion_fails_fast_and_the_next_verification_passes',
     'runtime_error out_of_memory fast (torch and Python allocations); the next passes'),
    ('worker leaks memory across jobs',
     'tests/reliability/test_worker_faults.py::test_a_leaking_candidate_runs_out_of_memory_and_the_next_one_gets_a_fresh_worker',
     ('out_of_memory, the worker is replaced, the next good candidate passes (it failed '
      'out_of_memory before the fix)')),
    ('CUDA illegal memory access',
     'tests/adversarial/test_adversarial.py::test_worker_recovers_after_an_illegal_memory_access',
     'runtime_error cuda_error; the next candidate passes (GPU)'),
    ('problem loops forever at import (`optimize`, `verify`)',
     'tests/reliability/test_cli_faults.py::test_optimize_on_a_problem_that_loops_forever_at_import_ends_with_a_clear_message',
     'exit 2 within 60 s with one line naming the file and the 5 s limit; no session folder'),
    ('problem loops forever at import (validate)',
     'tests/test_problem.py::test_infinite_loop_at_import_times_out_in_a_subprocess',
     'ProblemError after the timeout'),
    ('inputs too large for the worker',
     'tests/reliability/test_worker_faults.py::test_inputs_too_large_for_the_worker_are_named_with_their_size',
     ("runtime_error out_of_memory naming get_inputs(), '4.00 GiB asked' and the 2.00 GiB "
      'limit; the next passes')),
    ('inputs too large for the machine (validation)',
     'tests/reliability/test_worker_faults.py::test_inputs_too_large_fail_validation_with_the_size_before_any_worker_runs',
     'ProblemError naming get_inputs() and the byte count'),
    ("a forged reply written into the worker's pipe",
     'tests/reliability/test_worker_faults.py::test_a_forged_reply_on_the_pipe_never_shifts_later_verdicts',
     ('rejected protocol_tampering; the next job gets its own verdict (it got the previous '
      "job's before the fix)")),
    ('security: candidate dumps its environment',
     'tests/reliability/test_security.py::test_a_candidate_dumping_its_environment_finds_no_key_and_the_verdict_holds_none',
     'no key name or value anywhere in the verdict'),
    ('security: worker environment',
     'tests/verifier/test_worker.py::test_worker_environment_has_no_api_keys',
     'keys, tokens and secrets stripped'),
    ('security: validation process environment',
     'tests/reliability/test_security.py::test_the_validation_process_gets_no_key',
     'a problem asserting no key at import validates'),
    ('security: sessions, exports and CLI output',
     'tests/reliability/test_security.py::test_sessions_exports_and_cli_output_never_contain_a_key',
     ('keys in the environment and pasted into the problem appear in no session file, export '
      'file or CLI output')),
    ('security: sessions (fake agents recording a key)',
     'tests/test_session.py::test_an_api_key_in_the_environment_never_reaches_the_session_files',
     'no session file holds the key'),
    ('security: cache entry swapped for another valid library',
     'tests/reliability/test_security.py::test_a_cache_entry_swapped_for_another_library_is_rebuilt_not_loaded',
     'hash checked before loading: rebuilt, the right code runs'),
    ("security: the Verifier's inputs",
     'tests/reliability/test_security.py::test_the_verifier_takes_no_documents_only_sources_and_options',
     'Worker.verify takes sources, the op policy and options only'),
    ('security: instructions in a rag section, the problem source and comments',
     'tests/reliability/test_security.py::test_instructions_in_rag_sections_problem_source_and_comments_change_no_verdict',
     'verdicts identical with and without the injected text (fallback rejected, kernel passes)'),
    ('security: fake verdict files left for the next job',
     'tests/reliability/test_security.py::test_a_fake_verdict_file_left_by_one_candidate_does_not_reach_the_next',
     'both candidates judged on their behaviour'),
]


def outcomes(xml_path: str) -> dict[str, str]:
    out = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        path = cls.replace(".", "/") + ".py"
        if case.find("skipped") is not None:
            msg = case.find("skipped").get("message", "")
            state = "skipped (GPU)" if "CUDA" in msg else f"skipped ({msg[:40]})"
        elif case.find("failure") is not None or case.find("error") is not None:
            state = "**FAILED**"
        else:
            state = "passes"
        out[f"{path}::{name}"] = state
    return out


def state(res: dict[str, str], tid: str) -> str:
    """The outcome of a test, or of all its parametrised cases together."""
    if tid in res:
        return res[tid]
    cases = {v for k, v in res.items() if k.startswith(tid + "[")}
    if not cases:
        return "not run"
    return cases.pop() if len(cases) == 1 else "**FAILED**" if "**FAILED**" in cases else \
        ", ".join(sorted(cases))


def _doc(path: Path) -> str:
    text = path.read_text()
    doc = ast.get_docstring(ast.parse(text)) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first


def _expect(path: Path) -> str:
    return re.search(r"^# expect: (.+)$", path.read_text(), re.MULTILINE).group(1)


def adversarial_rows(res: dict[str, str]) -> list[tuple[str, str, str]]:
    rows = []
    for folder, test in (("candidates", "test_cpu_candidate_gets_its_expected_verdict"),
                         ("cuda", "test_cuda_candidate_gets_its_expected_verdict")):
        for p in sorted((ADV / folder).glob("*.py")):
            tid = f"tests/adversarial/test_adversarial.py::{test}[{p.stem}]"
            cli = f"tests/adversarial/test_adversarial.py::test_cli_verify_json_gives_the_expected_verdict[{p.stem}]"
            cli_run = folder == "candidates" and cli in res
            where = f"`{folder}/{p.name}`" + (" (+ CLI)" if cli_run else "")
            state = res.get(tid, "not run")
            if cli_run:
                state += f"; CLI {res[cli]}"
            rows.append((_doc(p), where, f"{_expect(p).replace('|', 'or')}: {state}"))
    return rows


def main(xml_path: str, command: str) -> None:
    res = outcomes(xml_path)
    adv = adversarial_rows(res)
    hacks = [r for r in adv if not r[2].startswith("pass")]
    legit = [r for r in adv if r[2].startswith("pass")]
    counts = {k: sum(v == k for v in res.values()) for k in ("passes", "**FAILED**")}
    skipped = sum(v.startswith("skipped") for v in res.values())
    print(TEMPLATE_HEAD.format(command=command, passed=counts["passes"],
                               failed=counts["**FAILED**"], skipped=skipped,
                               hacks=len(hacks), legit=len(legit),
                               cpu=sum("candidates/" in r[1] for r in hacks),
                               gpu=sum("cuda/" in r[1] for r in hacks)))
    print("## Adversarial candidates (must be rejected or found incorrect, with the named reason)\n")
    print("| pattern | test | result |\n|---|---|---|")
    for doc, where, result in hacks:
        print(f"| {doc} | {where} | {result} |")
    print("\n## Legitimate but unusual candidates (must pass: no false positives)\n")
    print("| pattern | test | result |\n|---|---|---|")
    for doc, where, result in legit:
        print(f"| {doc} | {where} | {result} |")
    print("\n## Faults and security\n")
    print("| pattern or fault | test | result |\n|---|---|---|")
    for what, tid, asserts in FAULTS:
        print(f"| {what} | `{tid.split('::')[0]}::{tid.split('::')[1]}` | {asserts}: "
              f"{state(res, tid)} |")
    print(TEMPLATE_TAIL)


TEMPLATE_HEAD = """# Reliability and anti-hacking

A kernel optimiser that reports false speedups or loses a person's work is worse than none.
This page lists every hacking pattern and fault the test suite throws at stitchcuda-lab, the
test that does it and what that test asserts. It is generated from a real run:

```
{command}
```

That run: {passed} passed, {failed} failed, {skipped} skipped (GPU tests skip on a machine
without CUDA; run them with `pytest -m gpu tests/adversarial` on a GPU machine).
{hacks} hacking patterns ({cpu} on CPU, {gpu} on CUDA) and {legit} legitimate candidates.
"""

TEMPLATE_TAIL = """
## Fixes these tests forced

- `numerics_flags`: a candidate that switched the process to TF32 when imported passed, since
  the reference then computed in TF32 as well. The Verifier now records the global precision
  switches once the problem is loaded, rejects any change the candidate makes, and restores
  them for the next job.

- `tensor_subclass`: a lazy `torch.Tensor` subclass passed (its work ran inside the comparison,
  outside the timer and the op trace). Outputs must be plain tensors.
- `hardcoded_output`, `cached_output`: a lookup table for the recorded seeds, and a cache that
  starts after the correctness trials, both passed. One held-out call after timing, on a seed
  nobody can know in advance, now catches them.
- `background_thread`: a native pthread filling outputs after return was named only on the
  first trial (later trials read as `constant_output`). Every trial's outputs are compared with
  their snapshots again after the trials.
- `patched_verifier`: replacing `verify.compare`, `torch.isnan` or `Tensor.__gt__` passed and left
  the worker patched for the next job. They are watched like the timers; the worker is replaced.
- `protocol_tampering`: a forged reply written into the worker's pipe passed and shifted every
  later verdict by one job. Each job carries a nonce its reply must echo.
- Memory: after `out_of_memory` the worker is replaced (a leak made the next good candidate fail);
  inputs too large for the worker say so in GiB with the limit.
- Store and cache: a full disk raised bare `OSError`s and a cut event line swallowed the next
  event; both are `StoreError`s with a hint now, and the cut line is truncated away.
- A problem that times out while validating names its file.

## Limits (what these checks do not promise)

- Candidate code runs inside the worker process, next to the Verifier. The checks above make the
  known ways of cheating visible; a candidate written to defeat this particular Verifier from the
  inside (walking stack frames for the nonce, rewriting memory through ctypes) can still win.
  What protects the caller is the process boundary: a clean environment without keys, a memory
  limit, a timeout, a fresh worker after anything suspicious.
- Memoisation by input identity (same tensor, same version: return the last answer) is not
  detected: the timed calls reuse one set of inputs, as KernelBench's do.
- The CUDA rows run only on a GPU machine; the CPU rows run in CI.
"""


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "pytest ...")
