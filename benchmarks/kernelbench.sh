#!/usr/bin/env bash
# The KernelBench sample on one GPU machine: `bench` over its level folders, one process per
# problem, results (json, md, per-problem logs) under ${OUT:-gpu_out}/kernelbench.
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
dirs=(); for l in ${LEVELS:-1 2 3}; do dirs+=("$kb/level$l"); done
python3 -m stitchcuda_lab bench "${dirs[@]}" --device cuda --iters "${ITERS:-1}" \
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
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"   # one file to bring back
