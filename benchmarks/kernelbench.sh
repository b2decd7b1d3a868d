#!/usr/bin/env bash
# The KernelBench sample on one GPU machine: `bench` over its level folders, one process per
# problem, results (json, md, per-problem logs, every try in sessions.txt) under
# ${OUT:-gpu_out}/kernelbench.
#   KB=path/to/kernelbench  LEVELS="1 2 3"  MODES=default  JOBS=3  BUDGET=540 \
#     bash benchmarks/kernelbench.sh
# JOBS problems share the GPU at once: their host work overlaps, their timing holds it alone.
# The sample must sit inside the working tree that travels to the GPU machine (an ignored
# folder), since nothing outside it goes there.
set -u
kb="${KB:-.kb}"; out="${OUT:-gpu_out}/kernelbench${TAG:+_$TAG}"; mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export STITCH_CACHE_DIR="${STITCH_CACHE_DIR:-/tmp/kb_cache}"
export STITCH_SESSIONS_DIR="${STITCH_SESSIONS_DIR:-/tmp/kb_sessions}"
# Inductor's compiled graphs and autotuning are kept across runs: a rerun times the same
# baselines without compiling them again.
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$STITCH_CACHE_DIR/inductor}"
# A GPU machine that starts bare each time keeps none of that. COMPILE_CACHE_IN (a folder
# holding compile-cache*.txz.* or .tgz.* from earlier runs) restores the judge's compile caches
# (Inductor's graphs and autotuning, Triton's kernels) and this process's, oldest archive
# first; COMPILE_CACHE_OUT (a folder) gets what this run added to them, as one more archive
# in parts of COMPILE_CACHE_PART (15m), for transfers that limit a file's size and their
# total (benchmarks/compile_cache.py). Compiled code only, no timing: every number is still
# measured in this run; only the baselines' compile time (three modes: 20-90 s a problem on
# an H100, mostly max-autotune's GEMM autotuning) goes. The kernel cache, whose entries are
# signed with a secret of this machine's, is not among them.
restored=$(mktemp)   # what the restore wrote: the rest, this run added
echo '{}' > "$restored"
if [ -n "${COMPILE_CACHE_IN:-}" ]; then
  python3 benchmarks/compile_cache.py restore "$COMPILE_CACHE_IN" "$STITCH_CACHE_DIR" \
    --manifest "$restored"
fi
dirs=(); for l in ${LEVELS:-1 2 3}; do dirs+=("$kb/level$l"); done
touch "$out/.started"   # the sessions this run writes are the ones after it
python3 -m stitchcuda_lab bench "${dirs[@]}" --device "${DEVICE:-cuda}" --iters "${ITERS:-1}" \
  --modes "${MODES:-default}" --timeout "${TIMEOUT:-240}" --budget "${BUDGET:-540}" \
  --jobs "${JOBS:-3}" \
  --out "$out" ${FILTER:+--filter "$FILTER"} >"$out/bench.log" 2>&1
echo "bench rc=$?"
grep -E "^\[" "$out/bench.log" | tail -50
python3 - "$out/results.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
for name, g in s.get("suites", {}).items():
    print(name, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in g.items()})
PY
# every try of every problem, its verdict and where its time went (the table keeps the best)
python3 benchmarks/sessions.py "$STITCH_SESSIONS_DIR" --newer "$out/.started" >"$out/sessions.txt"
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"   # one file to bring back
if [ -n "${COMPILE_CACHE_OUT:-}" ]; then
  # not where candidates run as this user: they could have written into the folders, and a
  # later run as root would trust what they left
  isolation=$(python3 -c "from stitchcuda_lab.verifier.pool import mode; print(mode())")
  if [ "$isolation" = same-user ]; then
    echo "compile caches not saved: candidates ran as this user here"
  else
    python3 benchmarks/compile_cache.py save "$STITCH_CACHE_DIR" "$COMPILE_CACHE_OUT" \
      --manifest "$restored" --part "${COMPILE_CACHE_PART:-15m}"
  fi
fi
rm -f "$restored"
