#!/usr/bin/env bash
# Sets up, then runs the test suite (GPU tests skip without a GPU).
#   scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
# two test processes: most tests wait on the Verifier's subprocesses, so two keep both cores
# of a small machine busy (the suite takes about 18 minutes on two cores instead of 29)
exec .venv/bin/python -m pytest -q -n 2 "$@"
