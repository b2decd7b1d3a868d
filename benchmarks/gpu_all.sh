#!/usr/bin/env bash
# One call on a multi-GPU machine: the benchmark over GPUs 1.. in the background while GPU 0
# runs the GPU tests, the examples and the latency benchmark. Everything lands in $OUT.
set -u
out="${OUT:-gpu_out}"; mkdir -p "$out"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
n=$(python3 -c "import torch; print(torch.cuda.device_count())")
bench_gpus=$(seq -s, 1 $((n - 1)))
( CUDA_VISIBLE_DEVICES="$bench_gpus" STITCH_CACHE_DIR=/tmp/bench_cache STITCH_SESSIONS_DIR=/tmp/bench_sessions \
  timeout "${BENCH_TIMEOUT:-540}" python3 -m stitchcuda_lab bench benchmarks/problems --device cuda \
  --iters "${BENCH_ITERS:-1}" --modes "${BENCH_MODES:-default}" --timeout 400 --out /tmp/bench \
  ${BENCH_FILTER:+--filter "$BENCH_FILTER"} >/tmp/bench.log 2>&1 ) &
bench=$!
CUDA_VISIBLE_DEVICES=0 OUT=/tmp/check bash benchmarks/gpu_check.sh
wait $bench; echo "bench rc=$?"
tail -45 /tmp/bench.log
mkdir -p /tmp/pack && cp -r /tmp/check /tmp/pack/ && cp -r /tmp/bench /tmp/pack/ 2>/dev/null; cp /tmp/bench.log /tmp/pack/
tar czf "$out/results.tgz" -C /tmp/pack .
