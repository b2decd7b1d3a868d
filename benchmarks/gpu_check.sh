#!/usr/bin/env bash
# One call on a GPU machine: GPU tests, optimize on the examples, verify latency.
# Writes logs and JSON under ${OUT:-gpu_out}; prints a short summary last. Wheels for the
# notebook packages, when wanted: python3 -m pip download -d .whl --python-version 3.12 \
#   --only-binary=:all: --platform manylinux2014_x86_64 plotly ipywidgets nbformat
set -u
out="${OUT:-gpu_out}"; mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export STITCH_CACHE_DIR=/tmp/stitch_cache STITCH_SESSIONS_DIR=/tmp/stitch_sessions
python3 -c "import torch, cuda.core; print('torch', torch.__version__, 'cuda.core', cuda.core.__version__, torch.cuda.get_device_name(0))"
# the notebook packages (the Profile tab's GPU test needs plotly and ipywidgets) are not on a
# GPU image with no network: wheels in an ignored .whl/ carried with the tree, installed into
# the python that runs the tests (`pip` alone may be another interpreter's)
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --find-links .whl plotly ipywidgets nbformat \
    >"$out/pip.log" 2>&1; echo "notebook wheels rc=$?"
fi
jupyter=$(python3 -c "import plotly, ipywidgets" 2>/dev/null || echo --ignore=tests/jupyter)
timeout "${GPU_TEST_TIMEOUT:-300}" python3 -m pytest -v -m gpu -p no:cacheprovider \
  $jupyter ${GPU_TESTS:-tests} >"$out/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|error" "$out/gpu_tests.log" | tail -3
grep -E "(FAILED|ERROR)( |$)" "$out/gpu_tests.log" | head -30   # -v: names even when the time limit cuts the run
for p in $([ -z "${SKIP_EXAMPLES:-}" ] && echo ${EXAMPLES:-examples/*.py}); do
  n=$(basename "$p" .py)
  timeout 240 python3 -m stitchcuda_lab optimize "$p" --device cuda --iters "${ITERS:-1}" --json \
    >"$out/opt_$n.json" 2>"$out/opt_$n.err"
  echo "optimize $n rc=$?"
  python3 - "$out/opt_$n.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print({k: d.get(k) for k in ("status", "correct", "speedup_vs_eager", "speedup_vs_compile", "eager_ms", "ours_ms")})
except Exception as e:
    print("no json:", e)
PY
done
if [ -z "${SKIP_LATENCY:-}" ]; then
  timeout 200 python3 benchmarks/verify_latency.py --device cuda --out "$out/verify_latency.json" >"$out/latency.log" 2>&1
  echo "latency rc=$?"; tail -12 "$out/latency.log"
fi
