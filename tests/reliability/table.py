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
     'runtime_error crash (SIGSEGV) with the fault log; the judge is untouched and the next candidate passes'),
    ('worker hangs',
     'tests/verifier/test_worker.py::test_hang_is_killed_as_timeout_and_the_next_verification_passes',
     'timeout within the limit; the candidate\'s process is gone; the next passes'),
    ('worker runs out of memory',
     'tests/verifier/test_worker.py::test_memory_exhaustion_fails_fast_and_the_next_verification_passes',
     'runtime_error out_of_memory fast (torch and Python allocations); the next passes'),
    ('worker leaks memory across jobs',
     'tests/reliability/test_worker_faults.py::test_a_leaking_candidate_runs_out_of_memory_and_the_next_one_gets_a_fresh_process',
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
    ('kernel cache: a planted entry with a matching hash file (no MAC, a zero MAC, another secret\'s MAC)',
     'tests/adversarial/test_cache_poisoning.py::test_planted_entry_with_matching_hash_is_never_loaded',
     'rebuilt, never loaded'),
    ('kernel cache: a candidate that poisons then a later, unchanged, correct program',
     'tests/adversarial/test_cache_poisoning.py::test_a_poisoning_candidate_does_not_change_a_later_verdict',
     'the later program passes'),
    ('security: worker environment',
     'tests/verifier/test_worker.py::test_worker_environment_has_no_api_keys',
     'keys, tokens, secrets and every STITCH_* variable absent from the candidate\'s process'),
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


def failures(xml_path: str) -> list[tuple[str, str]]:
    """(test name, first line of its message) of each failed test of the run."""
    out = []
    for case in ET.parse(xml_path).iter("testcase"):
        for f in case.findall("failure") + case.findall("error"):
            first = (f.get("message") or "").strip().splitlines()[:1]
            out.append((case.get("name", "?"), " ".join(first)[:300].replace("|", "/")))
    return out


def main(xml_path: str, command: str) -> None:
    res = outcomes(xml_path)
    adv = adversarial_rows(res)
    # a hack may be expected to pass (a limit, or a lie its counted work makes worthless):
    # it is still a hack, listed with the verdict it got
    legit = [r for r in adv if r[2].startswith("pass") and not r[0].startswith("Hack")]
    hacks = [r for r in adv if r not in legit]
    counts = {k: sum(v == k for v in res.values()) for k in ("passes", "**FAILED**")}
    skipped = sum(v.startswith("skipped") for v in res.values())
    print(TEMPLATE_HEAD.format(command=command, passed=counts["passes"],
                               failed=counts["**FAILED**"], skipped=skipped,
                               hacks=len(hacks), legit=len(legit),
                               cpu=sum("candidates/" in r[1] for r in hacks),
                               gpu=sum("cuda/" in r[1] for r in hacks)))
    for name, message in failures(xml_path):   # what a failure said, not only that it failed
        print(f"- Failed: `{name}`: {message}")
    print()
    print("## Adversarial candidates (must be rejected or found incorrect, with the named reason; "
          "where a pass is accepted, the header says why)\n")
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
Every number the project reports, every reward it exports and everything the LLM agents learn
from stands on the verdict, so the Verifier treats candidate code as an adversary.

## Threat model

A candidate is any Python file with a `ModelNew` (written by an agent, a person, or someone
trying to get a false verdict). It may run arbitrary code at import, in `__init__` and in
`forward`: monkey-patch torch, walk `gc` for tensors, read files, start threads and processes,
send signals, write to any file descriptor it can find, load C libraries, call CUDA directly.
It wants a verdict it has not earned (pass, a speedup), to change another candidate's verdict,
or to outlive its job.

## What the design guarantees, and how

- **The reference cannot be touched.** The reference model, its inputs, its outputs, the seeds,
  the baselines and the kernel cache's secret live in the judge, a process that never imports
  candidate code (`verifier/verify.py`). A candidate runs in a sandbox process of its own
  (`verifier/sandbox.py`), started ahead as a spare and destroyed after its one job
  (`verifier/pool.py`); its outputs come back as bytes and are compared in the judge.
- **Nothing survives a job.** Every process of the candidate's user (or session) is killed (as
  root, all at once: a process takes that user and signals all it may, `kill(-1)`, until none
  of the user's, or of its compiler's user, is left; killing by pid lost to chains of
  processes that each forked the next and exited, which lived on and took the next
  candidates' CPU: `candidates/fault_process_chain_outlives_job.py`,
  `tests/adversarial/test_leftovers.py`), and
  every file it left in the folders anyone may write to (`/tmp`, `/var/tmp`, `/dev/shm`,
  `/run/lock`) and every SysV shared memory segment, message queue and semaphore it made are
  removed; it gets no POSIX message queue, and its resource caps are hard limits it cannot
  raise again (`candidates/fault_ipc_and_lock_leftovers.py`, `fault_raises_its_limits.py`);
  the next candidate gets a new process. No
  verdict can be changed by an earlier candidate in the same session, pool or cache. When an
  iteration's candidates build side by side first (`verifier/prebuild.py`), each imports in a
  throwaway sandbox that is destroyed, with everything it started, before any of them is
  checked or timed; what that phase leaves is only the judge's own builds in the cache
  (`tests/verifier/test_prebuild.py`: a child and a thread spinning from the import are gone
  when it ends). A judge's folders on disk and in `/dev/shm` go with it even when it is killed
  mid-job.
- **Separation by user.** When the Verifier runs as root, each candidate runs under a fresh uid
  with no supplementary groups and `no_new_privs`; where Python lives under a folder others may
  not enter (`/root`), the sandbox gets a mount namespace in which that folder shows only what
  Python needs. It can then signal, trace or write no other process or file, and cannot read the
  cache's secret. Without root it runs as the caller's user in a session of its own (see Limits).
- **Secret seeds, every timed call checked.** Seeds come from the OS in the judge and reach the
  sandbox only with the call that uses them; both sides draw `get_inputs()` from them
  (`verifier/exchange.py`), so nothing can be tabulated ahead. A forward that draws random
  numbers (training-mode dropout left to PyTorch) starts, on both sides, from a seed the judge
  derives from the draw's with a key of its own, which says nothing of the draw's
  (`exchange.forward_seed`): handed-over inputs used to leave the candidate's generator
  elsewhere, and every such trial failed. Every timed call gets inputs of its
  own; after each round of timed calls the judge picks, only then, a call whose output it checks
  (`timed_output_mismatch`), and the last round checks one even where the spread checks were
  spent (`candidates/timed_calls_cheat_once_checks_are_spent.py` slows its first round so the
  checks go early, then answers empty; the spread and the widened draws catch it before this
  rule is needed). The rounds the checks are spread over are those the judge expects from the
  trial floor (and on CUDA from the time budget, counted in reported times, up to MAX_TRIALS
  calls): expected from the reported times on the CPU too, a claim of 0.001 ms a call made
  5000 rounds, one check each, and a candidate that skipped the work on 12 of its first
  round's 20 calls passed at 87x in one job in five
  (`candidates/timed_calls_skipped_behind_a_zero_claim.py`, found by a red team). With the CUDA arena (below) the sandbox is not told which calls were picked (the
  judge checks its own copies), nor, for the profiled calls, which one will be (picked before
  they run; only its copies kept). On the CPU what is checked is what the call returned: the judge
  reads each timed call's outputs out of the candidate's memory as the call answers (where it
  cannot, it pins the output file the sandbox wrote, a few hundred pages sampled, and refuses
  one written again since), so outputs cannot be computed once the check names its calls
  (`candidates/timed_outputs_filled_when_picked.py`). On CUDA the sandbox copies each timed
  call's outputs and inputs into an arena it makes before the candidate loads (driver memory
  exported as a file descriptor and sent over a Unix socket in the sandbox's own folder,
  accepted from that process alone, then imported and mapped for reading), and the
  judge copies them out as the call answers (`verifier/arena.py`,
  `cuda/timed_outputs_filled_when_picked.py`); where the mapping fails the sandbox keeps them
  and the verdict says so (`timed_outputs_kept_by_sandbox`). That copy is on the judge's
  clock, so it costs every layout alike: a dense tensor goes in as its elements lie, and the
  judge, off the clock, moves the bytes back into order (an honest channels-last program's
  2.1 GB output, copied through a contiguous temporary, cost 5 ms a call more than the
  reference's and was rejected as `patched_timer`: `cuda/pass_conv_channels_last_big.py`). A
  forged order is bytes moved, never a crash of the judge. The call's inputs
  reach the sandbox only once that clock runs. Timed calls get the memory checks of checked
  calls too: an output
  that shares memory with its input or with an earlier call's output is rejected there as well.
- **The whole input range, not only get_inputs()'s.** One more checked call, at a place the judge
  picks, gets the draw scaled by -2 (or 2, or -1: the first on which the reference stays as
  finite as on the draw; exact in every float format), all of it or, as the call's seed
  decides, only 8-32 elements at random places: a guard that samples the input to tell a
  widened draw from a plain one misses those (`candidates/range_sampled_guard.py`, which passed
  at 6.2x when every widened draw was scaled whole, and in about one job in five while only
  chance decided how the range trial and the few widened timed calls were scaled). On the CPU
  the widened timed calls meet both ways, whatever the range trial took: a candidate tells a
  checked trial (deterministic mode) from a timed call, so one exact in checked calls and
  guarded by samples in timed ones passed whenever its timed calls were only scaled whole
  (`candidates/seed_guided_range_guard.py`). A timed call whose inputs the judge hands over
  carries no seed: the places a widening scales follow from it, and that candidate replayed
  them to compute exactly there alone. And
  scaling all of it still catches an error too small to see in a few elements once reduced
  over many. Two more such calls go far from the range: each element times 64, 16 or 1/16
  (drawn per element; of either sign, or, where the reference is less finite so, one factor
  for all), one at a few places and one whole, so a polynomial good to twice the draw's range
  or a series good from half its lower bound fails too (`candidates/range_poly_within_2x.py`,
  `candidates/range_never_probed_toward_zero.py`), and so does a softmax that skips its max
  subtraction, whose exp overflows past 88.7: randn's draws times 16 never get there, and one
  large element of a few rarely lands in a row (`candidates/range_softmax_without_max.py`,
  which passed every draw when the far call was one, times 16 or 1/16). The two take opposite
  signs where the reference takes both (each sign drawn alone left exp's large positive inputs
  out of the whole job one time in four: `candidates/range_far_sign_coin_flip.py`). A last
  one scales the whole draw by 1/16 (either sign): the mix of factors keeps every row's size,
  and an RMS norm that drops its eps is wrong only on small rows
  (`candidates/norm_eps_dropped.py`, which passed every run). On the CPU a problem that draws no
  floating input has its integers widened (times 2 or -2, wrapping as PyTorch's do; not on a
  GPU, where an index out of range is a device-side assert, not an exception): a kernel that saturates
  where PyTorch wraps fails (`candidates/int_range_never_widened.py`). A kernel right only on
  the range `get_inputs()` draws from (|x| dropped on torch.rand's draws, a polynomial good on
  [0, 1)) is `input_range`; a fast path guarded by a check of the data is legitimate and
  passes (`candidates/pass_exp_fast_path_in_pass.py`).
- **Clocks outside the candidate.** Before the candidate is loaded, the judge times the sandbox's
  own call path on the reference. The verdict's time is never less than what the judge's clock
  saw on the candidate's quietest timed call, that path's least cost taken off, nor less than
  the median over its calls of what the judge's clock saw on each less the path and its
  allowance (a timer true on its quickest calls only, on calls of different sizes, or one call
  that returns at once, sets nothing), so a timer that under-reports claims nothing faster.
  When even the quietest call exceeds the sandbox's timer by
  more than the path's cost and a stated slack, and still does on two more rounds of fresh calls
  and on two rounds after waits of 1 and 3 s (a patched timer lies on every call; a busy host
  is not busy on every round: on an H100 host running eight problems, an honest GEMM's calls
  took 1 ms more than its timer said on three rounds back to back; where a later round agrees,
  the calls are timed again and theirs is the verdict's count, the judge's clock less the path
  as the first's is (the lesser of the two let a red team's timer that lied in both timings
  take the better of two draws of the noise), so a timer that lies until the judge pauses
  (`candidates/channel_send_rewrite_until_a_pause.py`) claims nothing by it), it is
  `patched_timer`; so is device time beyond 1.5x the timed median in the profiler's traces of
  timed calls (on CUDA: calls made the timed way, one of them checked; a checked call runs in
  deterministic mode, whose cuDNN convolutions can be slower than the timed ones). Device time
  is the time the device was busy, overlapping kernels counted once: a CUDA graph's parallel
  branches (cuDNN's RNN layers) or joined streams take less wall time than their summed
  kernels. Eager and torch.compile are timed by the same protocol in the judge, whose
  threads and precision switches no candidate can touch, on the same CPUs: a candidate's
  process cannot widen its CPU affinity (seccomp refuses `sched_setaffinity`). The path a
  candidate's calls take is the reference's: the harness's checks of a call's outputs against
  the ones it holds take each span once (asked per output, 7 small outputs against 126 held
  took 3-7 ms of the candidate's path that the calibration never paid, and an honest 0.5 ms
  candidate was called `patched_timer`). The path subtracted from the judge's clock is the
  least any job on the problem timed, down to this job's least less its spread (a calibration
  in a busy moment hid that much of a candidate's path work; the verdict names it,
  `path_floor`).
- **Nothing of the candidate's runs between its timer and the reply.** The sandbox's timer
  takes every profile, trace and `sys.monitoring` function away the moment the forward
  returns, before its end reading (a profile function waiting for the timer to return filled
  the outputs there and removed itself, passing at 5-36x eager:
  `candidates/profile_hook_fills_after_timer.py`); `sys.setprofile` and `sys.settrace` are
  watched as the timers are. On the CPU the collector of reference cycles is off for a timed
  call (refused if switched on), the outputs of the call before are let go only at the next
  call's `prepare`, outside the judge's clock, and the function the timer ran is kept past
  the reply (a `weakref.finalize` on an output, run as the harness let it go, filled the next
  output and passed at up to 8.5x: `candidates/finalizer_fills_after_timer.py`); audit hooks
  are refused (the sandbox's own, installed first, rejects every later one), and a Python
  signal handler installed by the candidate, or an interval timer left armed, is
  `patched_timer` (`candidates/signal_handler_fills_after_timer.py`).
- **Fallback detection from a process-wide trace.** One checked call, chosen at random, runs under
  torch.profiler (the ops of every thread, in aten's namespace and every other operator
  namespace: oneDNN's fused `mkldnn::_linear_pointwise` did a GEMM and its ReLU unseen when
  only aten's were read; kernels of every stream). Replaced compute done by
  PyTorch or Inductor (`pytorch_fallback`; on the CPU Inductor's C++ shows only by the mark
  around its compiled graphs), device-to-host copies in the forward
  (`device_to_host`) and a trace without any of the candidate's own launches
  (`untraced_compute`) are rejections. `KEPT_OPS` may name library ops (GEMM, convolution,
  attention) only, and a file's library work must be of a family the reference runs: a GEMM
  on a problem that has none is a fallback whatever `KEPT_OPS` says, and `mm` where the
  reference runs `addmm` is not (`aten.library_family`; a GEMM where the reference convolves
  or attends is not either: im2col, a 1x1 filter, attention as `bmm`).
- **Samples from outside, on the CPU** (`verifier/sampler.py`). The profiler runs inside the
  candidate's process, where a program can see it is on, and numpy shows in no trace. So in
  timed calls the judge picks (one in four, then more until 24 stops landed inside calls or
  half as many calls as were timed were sampled, and on, up to 12 calls, while fewer than 6
  samples found a thread in code that computes, in calls of 2 ms or more: a loaded host lands
  many stops in the interpreter), at moments it draws, it stops every thread of the candidate's process and
  reads, for each
  thread stopped in its own code, the address it stopped at (`/proc/PID/task/TID/syscall`,
  which the candidate cannot change). Each address is named by the file mapped there and, in
  PyTorch's library, by its function (the ELF symbol table): the candidate's own code, the
  interpreter and PyTorch's bookkeeping (which count neither way), PyTorch's CPU kernels
  (`clamp_min_scalar_kernel_impl`, `mkl_vml_kernel_sExp`), GEMM / convolution libraries
  (`mkl_blas_..._sgemm`, oneDNN), or another package's compiled code (numpy, scipy, a system
  BLAS; a copy under a new name is told by its build id). At least 2 samples, and a quarter
  of the samples in code that computes, in code the op policy does not let the forward use
  are `pytorch_fallback`: a profiler-aware fallback (`candidates/profiler_aware_fallback_big.py`,
  10 of 16 samples in `add_kernel` and `mul_kernel`) and a numpy forward
  (`candidates/numpy_forward_big.py`, 11 of 13 in numpy's `_multiarray_umath`) are caught.
  A stopped process cannot hide where it stopped, but it learns it was stopped once it is
  continued (a `SIGCONT` handler, a gap in its clock); so the first stop that finds work
  being done is judged alone too, and a program that hands its work to PyTorch until it is
  sampled and computes itself after (`candidates/sampled_then_honest_big.py`) is caught
  there (4 of 4 jobs) whenever that stop lands in its forward rather than in the call around
  it. Sampled calls are left out of the medians. A build the candidate asks for in the middle
  of a call is served and the call's stops go on (a request used to end them:
  `candidates/sampler_cancelled_by_build_request.py`), and so do they until a whole reply has
  arrived (one byte of the reply's length written before the forward used to end them:
  `candidates/sampler_blinded_by_early_reply_byte_big.py`). A job whose time runs out before
  the candidate's timed calls were made and watched is a timeout, not a pass (a warm-up call
  that slept until the job's last seconds left one timed call, unsampled:
  `candidates/sampler_starved_by_deadline_big.py`); an address a library held before the
  candidate's code loaded is named by that library whatever is mapped there later (PyTorch's
  code copied to anonymous memory and moved back in place:
  `candidates/torch_code_remapped_anonymous.py`); a file outside the installed folders is
  named by its build id before its name; and a process the candidate started, running at a
  stop, is `subprocess` (a child reaped by the kernel, under an ignored SIGCHLD, leaves no CPU
  time and no process to find after the call: `candidates/autoreaped_child_compute.py`).
  The maps are read again at every stop: the candidate's own kernel library mapped over a
  library it loaded (scipy's OpenBLAS) while the first stop read them, and moved off once it
  was continued, left that library's addresses named as the candidate's own code
  (`candidates/sampler_stale_maps_cache_big.py`). PyTorch's scatter / gather, index, sort,
  scan and resampling loops count as its kernels (`candidates/sampler_index_kernels_big.py`),
  and so do at::native's static workers and kernels named through a back-reference to `at`
  (a dense + sparse add and a fake quantizer computed a whole forward as bookkeeping:
  `candidates/sampler_sparse_fakequant_big.py`); a kernel is a copy (allowed) only where its
  op's name is a copy's, fill's or concatenation's in whole words (`aten.CHEAP`:
  `copysign_kernel` and `searchsorted_cpu_contiguous` are compute). A loop over elements is
  never bookkeeping, whatever helper names its lambda (ELU with alpha 0 did a ReLU as
  `get_scalar_elu_elementwise_func`: `candidates/sampler_relu_as_elu_bookkeeping_big.py`),
  and a stop in the math library (libm, libmvec) is named by its caller (x86-64): that ELU
  loop's scalar path spends most of its time in libm's `expf`, which was filed as the
  runtime's, and the candidate passed one run of five there. The caller is read from the 16
  words above the thread's stack pointer: each word just past a call whose target, followed
  through the PLT, is in the math library names a caller, and the gravest names the stop. A
  return address of the candidate's own written into the unused slots of `erff`'s frame, next
  to PyTorch's, named the stop the candidate's own while the first such word counted
  (`candidates/sampler_libm_caller_forged_gelu_big.py`); PyTorch's cannot be taken away.
  ATen's special functions called out of line from their loops (`calc_digamma`, the
  incomplete gamma's `_igam_helper_*`, the Bessel functions, `erfcx_y100`: 60 symbols,
  templates outside any namespace) were bookkeeping and are its kernels),
  and an at::native lambda run by a parallel region or as a TensorIterator's loop is a kernel
  (sparse products, pools, `nonzero`, whose namespace the mangling gives as a back-reference).
  A candidate file may spend time in library
  code (oneDNN's generated kernels among it) only where the reference runs a GEMM,
  convolution or attention (`candidates/sampler_onednn_jit_big.py`,
  `candidates/sampler_gemm_family_hidden_big.py`). The quarter is of the samples in code that
  computes less the code the forward may hand work to and less copies: a kept convolution
  took most of a forward, and PyTorch's tanh done for the epilogue the file claimed hid under
  it (`candidates/sampler_epilogue_share_under_library.py`). Only the libraries the judge
  built and copied into the sandbox are the candidate's own code there: torch.compile's
  library, which Inductor wrote to its cache in the sandbox's folder, ran the reference in
  every timed call as the candidate's (`candidates/inductor_timed_only_big.py`). Code in a
  file outside the installed folders that the judge did not build for it is another
  package's, wherever it lies (Inductor's cache moved to /dev/shm:
  `candidates/sampler_inductor_cache_outside_folder_big.py`), and a built library counts as
  the candidate's only while its very file is mapped: the judge's copy, which the candidate
  cannot write, by device and inode (Inductor's library renamed over a built one's name:
  `candidates/sampler_inductor_renamed_over_handed_lib_big.py`).
- **Tolerance per dtype and per scale** (`verifier/compare.py`): fp32 1e-4, fp16/bf16 1e-2,
  float64 1e-9, integers exact (in their own type: float64 holds 53 bits); each output must also be within rtol of the reference in relative
  norm, so a low-precision computation cannot hide under atol; where a few large outputs keep
  atol unscaled (a root mean square of 1 or more), more than 2% of the elements above the
  output's rounding noise off by more than ten times rtol of themselves is a mismatch (zeroed
  or crude small values of an exp of wide logits passed:
  `candidates/exp_small_values_zeroed_under_atol.py`, `small_outputs_power_of_two.py`; counted only
  on get_inputs()'s draws, not on the widened ones, where an honest formula exact to the draw's
  rounding loses the precision of outputs far smaller than the draw's). A negated or
  conjugated view is read resolved, as its caller reads it (`candidates/timed_neg_view_output.py`,
  `timed_conj_view_output.py` passed while the judge read the view's memory as it lay). The
  verdict states the tolerance and why; a mismatch says where (first indices, rows affected). Outputs are compared a chunk at
  a time on the device, so an output of billions of elements fits beside the reference.
- **Tolerance per the reference's own precision.** The reference may itself be further from
  exact arithmetic than the tolerance: PyTorch runs fp32 convolutions on TF32 tensor cores by
  default (up to 5x the tolerance on the KernelBench sample), and long fp32 sums, scans and
  cancellations carry their own rounding. Another correct program (another algorithm or order,
  channels-last, a sum kept in double) then misses the reference while agreeing with exact
  arithmetic as well as it does. When an output misses the reference, the judge computes the
  reference in float64 on the same inputs (once per call, only then), and the output passes if
  it is within the tolerance plus 6x the reference's own error at its 99.9th percentile of
  that result, and within 3x the reference's error in norm, over the whole output and again
  with each element's error taken relative to its size (an allowance earned where the outputs
  are large must not cover the small ones: `candidates/widened_small_outputs_dropped.py`);
  and no more than 0.1% of the elements may be beyond the tolerance plus 6x the reference's
  99.9th-percentile error among the outputs of about their own size (binary exponent at most
  one above theirs): exp's outputs below 1.7e-3 dropped, a tenth of them, each under the
  reference's typical error, passed the rest (`candidates/widened_tenth_of_outputs_dropped.py`),
  while another order of a scan's cancellations misses that allowance on 0.02% of its small
  outputs (`candidates/pass_scan_in_blocks.py`)
  (TF32 truncated instead of rounded
  measured 2.6x; bf16 is about 8x and stays incorrect: `candidates/cancellation_bf16.py`,
  `cuda/conv_bf16_under_tf32_reference.py`). A reference further than 1e-2 from its float64
  run (random draws) widens nothing. One whose largest error is over 64 times its typical one,
  both as it is and relative to each element's size (a tie or threshold decided otherwise, an
  exp of a scan whose terms cancel; a few huge outputs of a partly widened draw carry large
  errors that are no tail), widens no element: there the output must be within the tolerance
  of the float64 result on all but twice as many elements as the reference misses it on,
  within the norm limit, no element may miss by more than half of its size plus the
  reference's typical error (or 3x the reference's largest such miss), and no more than
  max(4, 2x the reference's count) may miss by over a tenth of that: not a norm of the errors
  relative to each element's size, which one cancellation makes, and which two honest orders
  put up to 16x apart (`candidates/pass_scan_in_blocks.py` passes;
  `candidates/tail_allowance_low_precision.py` and
  `candidates/tail_misses_scaled_on_small_outputs.py` do not). Limits: up to four outputs
  of such a draw may be off by up to half of themselves, and an output smaller than the
  reference's typical error near it may be off by all of itself:
  `candidates/tail_misses_spent_on_small_outputs.py`, which zeroes the outputs below 1e-5 of
  their batch's largest, was caught in 13 of 15 verifications in a row and passed two. One whose float64 result is under
  1% of its own error in norm is all rounding noise around an exact 0 (the mean of a
  normalised tensor), and any other order of the same sums gives other noise: there the output
  is judged by its distance from the float64 result alone, within 64x the reference's error
  in norm and 64x its 99.9th percentile in each element (fp32 sums in another order measured
  5-6x, one running sum 20-31x, fp16 values 120x, bf16 1000x), with a mean error within 64x
  the reference's plus 6 standard errors of its own spread (rounding noise averages out over
  the elements, an offset does not: the right noise plus 48 passed where one rounding's
  noise is at most 8, `candidates/noise_rule_offset_on_noise.py`), and so is a second call on
  the same inputs (float atomics change a sum's order from call to call):
  `candidates/pass_noise_in_another_order.py`, `candidates/pass_noise_order_changes_by_call.py`
  and `candidates/pass_noise_exact_zero.py` pass, `candidates/noise_bet_in_bfloat16.py` does
  not. Such noise must spread over most elements with no tail: a threshold decided otherwise
  on a few values that are exactly 0 is no allowance. A percentile, not the largest error,
  so that a few large errors of the reference do not become every element's allowance; an
  exact reference allows nothing more. The verdict's tolerance names the reference's error when it was used.
- **Builds leave nothing for later jobs.** A candidate may ask for 64 builds and be handed
  128 MB of libraries (the cache keeps every build past the job; one build more may land, up
  to 256 MB); the compiler writes its temporary files in its build's folder, may write no file
  over 512 MB (an inline `.fill` asked the assembler for GBs) and goes whole at its timeout;
  a sandbox's end removes the files its candidate and its compiler left in the temporary
  folders and in any folder of theirs anyone may write to (`test_build_leftovers.py`,
  `test_leftovers.py`). The cache as a whole keeps under `STITCH_CACHE_MAX_MB` (2 GB): past
  it the least recently used entries go, never one used in the last minute or being built
  (`tests/runtime/test_cache.py`).
- **The kernel cache cannot be poisoned.** Builds are done by the judge (the sandbox asks for
  them), through a cache whose entries carry an HMAC under a secret only the judge reads; a
  planted entry, with a matching hash file or not, is never loaded. Kernel sources may include
  only plainly named system headers, however the directive is spelt (a macro naming the file,
  comments, line splices, trigraphs and digraphs: NVRTC compiles in the judge's process and
  reads what it includes as the judge, `candidates/build_include_by_macro.py`). The check
  reads the source whole, comments and literals included (a lexer of its own was put out of
  step with the compiler's by a digit separator, a form feed or a raw-string prefix), in
  time linear in its length; it refuses what it cannot follow (a comment between a hash and
  its word, `#line` and line markers, whose file the compiler quotes in its errors,
  `__has_include` in any spelling but a paste, a NUL, a lone carriage return); a quoted name may
  hold no folder, nothing in the judge's own folder may be named (NVRTC looks for a relative
  name there, and the sandboxes' folders are in it; its forked child's folder is the root
  folder). No text check sees an include made inside a system header through a macro the
  kernel redefines (thrust's, on a CUDA 12 toolkit, read any file and its lines came back in
  the log), so NVRTC compiles in a child forked from the judge that takes the builder's uid
  first, killed past a timeout (a FIFO it opens blocks for ever). A C kernel is preprocessed, compiled to assembly and assembled in
  three steps, each checked before the next: the preprocessor's linemarkers must name only
  the kernel, our header and the compiler's system headers (a failing preprocessor stops the
  build; its log quoted nothing), and the inline assembly, escapes decoded and macros
  expanded, may hold no `.incbin`, `.include`, `.macro`, `.irp` or `.rept`. Flags come from
  an allowlist (ptxas's too: `--options-file` read a file as the judge); `cc` runs as a user
  of its own. A built library is made in the candidate's folder through that folder's descriptor
  (`O_CREAT | O_EXCL | O_NOFOLLOW`) and given to the candidate's user through its own: the
  judge, as root, copied it there and then chowned it by path, and a link swapped in during
  the copy got any file chowned to the candidate (`candidates/build_chown_symlink_race.py`).
- **An infinite reference is met only by the same infinity.** The bound `atol + rtol·|ref|`
  is infinite there, so any number but NaN was within it (`candidates/inf_outputs_unchecked.py`,
  a kernel writing 0 where exp overflows, on `problems/exp_overflow.py`).

## The run behind the tables

```
{command}
```

That run: {passed} passed, {failed} failed, {skipped} skipped (GPU tests skip on a machine
without CUDA; the CUDA rows run on a GPU with `pytest -m gpu --ignore=tests/jupyter tests`).
The CUDA rows' last run: one H200, 2026-12-02, late evening (this Verifier with the trials'
inputs handed over by the judge, before the timed calls' inputs were checked after the round,
before the CPU's widened timed calls and before widened draws scaled only a few places; the
CPU's mapped inputs and frozen sandbox do not apply there), `pytest -q -m gpu tests/adversarial`: 29 passed in
219 s, every CUDA candidate with its expected verdict (and the worker recovered after the
illegal memory access).
{hacks} hacking patterns ({cpu} on CPU, {gpu} on CUDA) and {legit} legitimate candidates.
"""

TEMPLATE_TAIL = """
## Remaining limits

- **Outputs reused across calls, beyond a budget.** The sandbox keeps the newest outputs of
  its checked calls alive, up to 1 GiB on CUDA and 2 GiB on the CPU, so a new output that shares
  their memory is the candidate's doing (`cached_output`); older ones are held by a weak
  reference to their storage and count while it lives. Memory the candidate owns outside torch
  and wraps afresh on every call (`candidates/cached_raw_buffers_rewrapped.py`: two numpy
  buffers in turn) is caught within the budget; for outputs larger than the budget its earlier
  wrapper dies and the reuse gets past this check. Holding every output held a job's every
  output: a softmax over 1.6 billion elements ran the candidate's GPU out of memory; 8 GiB on
  CUDA kept five outputs of 1.6 GB alive beside the judge through a job. A call's own two
  outputs, and a timed call's against the previous call's, are compared while both are held.

- **Without root** candidates run as the caller's user. They cannot touch the judge's memory
  (`PR_SET_DUMPABLE` 0) and their processes and files are cleaned up, but they could signal
  other processes of that user, write files that user may write (the package itself, if it is
  writable) and read the kernel cache's secret; a process of theirs in a session of its own
  is out of the teardown's reach (it kills by session there), and NVRTC reads what a kernel
  includes as the caller. Run the Verifier as root (as CI and the GPU machines do) for the
  full separation.
- **NVRTC's child is a copy of the judge.** It takes a user of its own before it compiles,
  so it opens no file the judge alone may read, but its memory is the judge's (the
  reference, the seeds): a kernel source that took over NVRTC itself (a compiler bug) would
  see them. C is compiled by a fresh `cc` process instead.
- **The trace is taken inside the candidate's process.** A candidate that notices the profiler
  and computes differently while it runs, or rewrites the profiler's output, can hide a
  PyTorch fallback from the trace. On the CPU the judge's samples from outside see it when
  they land in the fallback's work: a forward of a few microseconds (`candidates/
  profiler_aware_fallback.py` on a 64 x 96 matrix) is rarely where a stop lands, since the
  call around it (messages, inputs mapped, outputs checked) takes a millisecond. On CUDA the
  trace is of every stream of the device, which no candidate can keep its kernels out of.
  Either way its outputs are checked and its times bounded by the judge's clock, so its speed
  is real; only "which code computed it" can be misattributed.
- **Checks only the candidate's process can make** (an output sharing memory with an input,
  outputs changed after the call) are off when it rewrites the harness it runs in (the names
  the sandbox looks up in its own module). The judge sees bytes, not memory. A mutated input
  is looked for in every checked trial and, after each round, in the timed calls the judge
  picks: the sandbox writes their inputs as the calls left them and the judge compares them
  with its own draw. That caught `candidates/timed_input_mutation.py` (which spoils its
  inputs only when deterministic mode is off) and `candidates/patched_harness_main.py`
  (which switches the sandbox's own checks off and computes in place over its input, and
  passed before); a harness rewritten to write back the original inputs would get past it.
- **A timed call's path holds no pass over the bytes** (on the CPU). The judge's clock runs
  from a timed call's command to its reply, and the judge takes off the path it calibrated on
  the reference in the same process before any candidate code. That path used to read the
  inputs from their files and write the outputs into theirs, one pass over each, and a
  candidate that replaced those two harness functions with one pass computing as it read hid
  its forward there (`candidates/path_compute_in_takeover.py` passed at 490x eager on a 16 MB
  pointwise problem). Now the sandbox maps the input files copy-on-write (their page tables
  filled ahead, `MADV_POPULATE_READ`: 1.3 ms for 16 MB where a read took 9-11 ms on a 2-core
  host) and the judge reads the outputs straight out of the candidate's memory
  (`process_vm_readv`) once the call has answered, in 64 KB pieces in an order it draws, so
  that a process still writing them after its reply cannot keep ahead. Before it reads, it
  stops every thread of the sandbox and every other process of the candidate's (a process
  cloned to share its memory, `CLONE_VM` without `CLONE_THREAD`, is not one of its threads:
  two such siblings, one holding the memory map's lock through the read while the other
  computed the outputs, passed at up to 567x eager,
  `candidates/peek_stalled_by_clone_vm_sibling.py`). Both path candidates,
  now hooking the mapping as well, are `patched_timer`. Reading another process's memory
  needs root or a system that lets a user trace its own processes; the judge tries it on the
  sandbox before the candidate is loaded, and where it cannot, outputs travel as files again
  (pinned as before) and this limit is back. On a loaded 2-core host the judge's clock still
  lets the hooked path through (the allowance for the path's spread, `CLOCK_PATH_SHARE` of
  its calibrated median, grows with the load): mostly with its pass counted (1.2-3.0x eager,
  where an honest kernel gets 14x), once at 28x, its pass hidden in that allowance
  (2026-12-04). Its header accepts either verdict.
- **The range call is announced where the inputs are large.** The judge draws every trial's
  inputs and hands them over (files the sandbox may read), so no command says which trial is
  the one outside get_inputs()'s range (`candidates/range_reads_its_command.py`, which reads
  its command, is caught). Inputs over 256 MB, or not contiguous (handed over, their strides
  would be lost), are still drawn in the sandbox from the seed and a widening the command
  names: there a candidate that reads its commands can compute properly in that call alone.
  A kernel that checks its data instead pays for the check in every timed call.
- **A checked call's second call is the candidate's to report.** The determinism check compares
  the outputs a checked call's second run on the same inputs returned with the first's; the
  sandbox is the candidate's process, so it can name the first's bytes for both (the same
  arena place on CUDA, the same bytes in two files on the CPU) and hide a difference between
  its own two runs. It gains nothing the check guards: each checked call's outputs, and
  each picked timed call's, are still compared with the reference. A reply may not name more
  outputs than the reference has: the judge counts them before it reads or copies any
  (`candidates/checked_outputs_flood.py`, and its CUDA twin for the arena).
- **A checked call can be told from a timed one** (deterministic mode is on in the checked
  trials, so that unwritten output memory reads as NaN). On the CPU the judge hands every
  timed call its inputs too, so it widens some of them (at places it draws, one in every one
  to two rounds) like the range trial, checks every such call after its round and leaves its
  time out of the medians: a program right outside get_inputs()'s range only in checked trials
  is incorrect `input_range` (`candidates/range_poly_when_timed.py`,
  `candidates/range_abs_dropped_when_timed.py`). On CUDA the timed calls draw their inputs in
  the sandbox from a seed, so none is widened there, and such a program gets past the range
  check on a GPU.
- **The CPU clock bound is coarse.** Waking a process on a busy 2-core machine takes
  milliseconds, so on the CPU the judge's clock may exceed the candidate's timer by 2 ms plus
  half the calibrated path, or 200% of the reported time, before it is `patched_timer` (on
  CUDA: 0.05 ms plus half of the calibrated path, or 50%). On a 2-core host running other
  work at twice its cores (two test workers, each with a judge and a candidate process, and
  more beside), an honest candidate's path has come out 8-20 ms longer than its calibration
  and been called `patched_timer` (`baseline_burner_grandchild` in some loaded runs, before
  the rounds after waits); allowing
  the whole path instead let a timer that claimed 2% of its time through. The CPU verdicts
  are meant for a host that is not oversubscribed. Either way the verdict takes at least the
  median over calls of the judge's clock less the path and its allowance, so what a lie within
  the bound can gain is that allowance (2 ms plus half the path on the CPU): on a 2-core host,
  where moving 16 MB each way makes a path of 12-16 ms, a timer that claims 2% of a 2 ms
  forward can pass at its claim (`candidates/channel_send_rewrite.py`); the same lie about a
  forward of tens of milliseconds over small inputs is caught
  (`candidates/channel_send_rewrite_slow.py`). The path is calibrated in rounds over the same
  output files the timed calls write, until its least settles: a fresh process's first calls
  over fresh memory took 50-70 ms of path where the timed calls took 12. The quietest call's
  time by the judge's clock replaces the candidate's own only when it exceeds it by more than
  the calibrated path's spread (at least 0.5 ms on the CPU): an honest 0.3 ms kernel on a
  busy host was otherwise timed at twice its time. On the CPU the cache
  flush comes before the inputs are drawn (the
  flush takes tens of milliseconds and varies with load), so inputs are warm there, for every
  contender alike; the judge flushes from its own process, before eager's calls and the
  candidate's alike (a flush in the candidate's process was its to skip:
  `candidates/flush_skipped_weights_warm.py`).
  The path's median is believed up to twice its least: beyond that the calibration met a busy
  host, and a forward done inside the harness's own input path by a candidate timed once the
  load had gone (`candidates/path_compute_in_takeover_silu.py`) passed at 1.33x eager beside
  another test process. Where the load changes between the baselines and the candidate's
  calls themselves (eager, timed again after them, moved by more than a tenth), the verdict
  says `host_load_changed`: its ratio compares two loads, and a session ranks it below every
  steady verdict. Such a ratio means nothing: a load that covers the whole calibration raises
  the path's least itself, and the same candidate passed so at 1.2x, 6.3x and once 2176x
  eager (three CPU hogs started with the verdict, on a 2-core host). Only steady verdicts'
  speed-ups stand.
- **Work after the timer through the interpreter, at its edges.** A `sys.monitoring` callback
  that runs while the sandbox clears the tool ids, and registers again on one already
  cleared, is not seen; nor is a signal handler installed in C (`sigaction`) with a POSIX
  timer, which Python's view of its handlers does not show. Either is still bounded by the
  judge's clock and its allowance.
- **Small values a few percent off, where the reference is itself inexact.** An exp whose
  outputs below 1e-3 are computed to 6% (every value within fp32's atol) passes where the
  reference is 0.1% off exact arithmetic: the float64 rule allows what the reference's own error
  earns (`candidates/small_outputs_crude_exp_moderate_rms.py`).
- **Outputs are read, not their provenance, beyond files.** An output in a mapping of a file
  is refused (`candidates/output_remaps_input_file.py`: the input's file mapped again held
  the answer of an identity with no byte moved, at 4-33x eager); anonymous memory is judged
  by its addresses alone, so pages shared with an input by some other means than a file
  mapping would not be seen (none is known).
- **Sizes are drawn as get_inputs() draws them.** Values are widened, shapes are not: a
  problem whose row count is drawn per call is checked on the counts its draws give, and a
  tiling bug that leaves the last block unwritten only when the count is a multiple of the
  tile passes about two jobs in three (`candidates/ragged_tile_multiple_bug.py`).
- **The judge maps memory the candidate made (CUDA).** The arena a timed call's outputs cross
  is the sandbox's allocation, imported by the judge as a reference of its own (the memory
  lives until the judge lets it go) and mapped read-only at the size the sandbox named (the
  driver refuses a mapping larger than the allocation; read-write where a driver maps device
  memory no other way, which changes nothing the candidate can do; read-only on the H200). The candidate can write there at any
  time, which is why the judge copies each call's part out as the call answers; what it
  writes later reaches only the arena. Where the driver refuses the export or the import, the
  sandbox keeps the outputs until the picks are known, as before, and the verdict is flagged
  `timed_outputs_kept_by_sandbox`: there a candidate that computes only the picked calls'
  outputs passes. An arena too small for a draw's inputs (sized from 8 draws with half again
  as much room) leaves that call's inputs unchecked, believed only where its outputs and
  inputs truly exceed it. Run on the H200 on 2026-12-03: the CUDA adversarial set passed
  (30 of 30 in `cuda/`, `timed_outputs_filled_when_picked.py` among them) and
  no verdict of a KernelBench level-1 run carried the flag.
- **A helper process seen only at the end, on CUDA.** On the CPU a process the candidate
  started, running at any sampling stop, is `subprocess`; on CUDA there are no stops, and a
  helper that does the forward's work in a process of its own (its kernels in no trace of the
  candidate's) and exits before the job's end is seen only by the CPU time of the children the
  candidate waited for. Its work is inside the timed calls, so its speed is real; only "which
  code computed it" can be misattributed.
- **On CUDA the L2 flush runs in the candidate's process.** Before each timed call the sandbox
  writes 256 MB on the device, after the inputs are drawn and before the start event: a
  candidate that makes its own process's flush a no-op finds its freshly drawn inputs in the L2
  cache (32 MB of input and output fit an H100's 50 MB), where eager's calls, flushed by the
  judge, read them from memory (`cuda/flush_skipped_inputs_warm.py`, not yet run on a GPU). On
  the CPU the judge flushes from its own process; on CUDA that needs a round trip between the
  draw and the call, or a flush buffer in the arena the judge can check.

- **A kept library op's own fusions, in timed calls only.** oneDNN's fused ops
  (`mkldnn::_convolution_transpose_pointwise(..., "tanh")`) are read from the trace like any
  op (`candidates/trace_blind_mkldnn_linear_relu.py`, `trace_blind_mkldnn_namespace.py`: the
  trace used to keep aten's ops alone), but a file that calls one only when deterministic mode
  is off does the epilogue it claims inside the library's generated code, where the sampler
  allows library work (`candidates/sampler_epilogue_in_onednn_postop.py`). And a fallback
  under copies the file adds itself (`candidates/sampler_sparse_csr_reduce_big.py`, sparse
  products after concatenating whole inputs) is sampled mostly in its copies; it runs at
  0.1-0.5x eager, which the session never keeps.
- **Threads that outvote.** Threads spinning in the candidate's own code can outvote one
  thread in PyTorch's kernels, since every thread is sampled at every stop
  (`candidates/sampler_share_diluted_big.py`; it passes alone, and was caught in one loaded
  run of the suite, where its spinning threads got fewer samples); a per-thread judgement
  would close it. (A
  library with no build id copied into the candidate's folder, or one copied and deleted once
  loaded, used to count as its own code; only the libraries the judge handed over do now:
  `candidates/sampler_library_without_build_id_big.py`,
  `candidates/sampler_deleted_library_copy_big.py` are caught.)
- **The far ways are powers of two**, so a range reduction that handles only the binary
  exponents probed passes (`candidates/range_far_exponent_gaps.py`). (The far and small range
  trials are checked trials, which a candidate tells from a timed call; the CPU's widened
  timed calls now take every widening those trials vetted, not only the near one, so
  `candidates/range_far_only_in_checked.py`, `range_small_only_in_checked.py` and
  `range_softmax_max_only_in_checked.py` are caught. CUDA's timed calls are not widened: there
  the sandbox draws its inputs from a seed.)
- **A pool of worker threads is refused** (`candidates/pass_persistent_thread_pool.py`, a
  legitimate program): a thread alive after a call is `background_thread`, and a pool's idle
  workers are. A thread that finishes a call's outputs a moment after the call answers cannot
  be told from a pool that waited by the outputs alone (the judge reads them after the reply,
  and a pass over a small tensor takes microseconds: `candidates/timed_thread_fills_later.py`);
  the message says to parallelise inside the kernel instead.
- **Outputs rotating over buffers of the candidate's own** (`candidates/
  timed_outputs_two_buffers.py`): a timed call's outputs are compared for shared memory with
  the previous call's and the checked trials' only, since the previous outputs are let go so
  that the next call's can take their memory back (as a caller that drops its results would).
  A program that returns one of two buffers in turn passes; its values are right every time,
  and a caller that keeps a result across two calls finds it overwritten.
- **Inputs drawn in the candidate's process.** On the CPU the judge draws a timed call's inputs
  and hands them over as files the sandbox may read, not write (up to 256 MB; larger ones the
  sandbox draws). On CUDA, and for larger inputs, the sandbox draws them, inside the judge's
  clock: work moved into the draw (a replaced `torch.randn` that computes the answer as it
  draws, `candidates/precompute_in_randn.py`) is counted in the verdict's time, but only to
  within the draw's own spread (tens of microseconds on a GPU, milliseconds for large CPU
  draws). Handing device inputs over through a CUDA IPC handle would close it, but it cannot
  cross users: on the H200 a process that took another uid (before or after its CUDA context
  came up) failed to open the judge's handle (`cudaErrorMapBufferObjectFailed`), and a
  candidate's own uid is what keeps it from signalling the judge and reading its files.
- **Inputs mapped inside the clock, in parallel.** The judge moves a timed call's input files
  where the sandbox may read them only once its clock runs, and the harness maps them inside
  that clock: on a host with a spare core the candidate can compute from the bytes meanwhile
  (a native thread watching the folder, `candidates/inputs_read_before_the_clock.py`), and the
  judge's clock sees the longer of the two, not their sum. Since the files are mapped rather
  than read, what goes uncounted is at most the mapping's time, about a tenth of a pass over
  the inputs (it was one whole pass, all of a memory-bound forward).
- **What the samples cannot name.** Code generated at run time (anonymous executable memory)
  counts as a vendor library's (oneDNN's convolutions and GEMMs run there on the CPU), and code
  the candidate compiles in its own process (an extension it builds, torch.compile's C++ with
  its trace mark hidden) as its own; a library copied and then altered (its build id
  changed) does too. (A candidate that compiled the reference with torch.compile at import
  and ran it wherever the profiler was off was rejected, in 76 s, only because Inductor's
  compile threads were left running, `background_thread`; one that shut them down would
  pass.) Work shorter than the time between two stops is seen only now and then
  (`candidates/numpy_forward.py`: a numpy forward of a few microseconds).
- **load_inline candidates** build in their sandbox (a candidate's process writes nothing another
  reads), so each verdict rebuilds them; NVRTC and C kernels come from the judge's cache.
- The CUDA rows run only on a GPU machine; the CPU rows run in CI.
"""


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "pytest ...")
