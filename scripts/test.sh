#!/usr/bin/env bash
# Sets up, then runs the test suite (GPU tests skip without a GPU).
#   scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
exec .venv/bin/python -m pytest -q "$@"
