#!/usr/bin/env bash
# Sets up, then optimises an example model with the offline agents (GPU if there is one).
#   scripts/optimize-example.sh [PROBLEM.py] [extra optimize options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh run
problem="${1:-examples/pointwise_chain.py}"
shift || true
exec .venv/bin/stitchcuda-lab optimize "$problem" --device auto --iters 2 "$@"
