#!/usr/bin/env bash
# Creates .venv (once) and installs stitchcuda-lab into it.
#   scripts/setup.sh           the package with the notebook and LLM extras
#   scripts/setup.sh dev       plus the test tools
# A torch that is already installed (a GPU user's CUDA build) is kept: the venv sees the
# system's site-packages. Only where no torch exists at all is one installed.
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-run}"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($py --version)"
  "$py" -m venv --system-site-packages .venv
fi
vpy=.venv/bin/python
pip_install() {
  # Local package mirrors some machines configure print one warning per package: hide those.
  "$vpy" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location '.*' is ignored" || true; }
  return "${PIPESTATUS[0]}"
}
if ! "$vpy" -c "import torch" >/dev/null 2>&1; then
  echo "[setup] no torch found: installing torch==2.13.0"
  pip_install "torch==2.13.0"
fi
stamp=".venv/.stitch-installed-$extra"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  if [ "$extra" = dev ]; then spec=".[dev]"; else spec=".[notebook,llm]"; fi
  echo "[setup] installing stitchcuda-lab $spec"
  pip_install -e "$spec"
  touch "$stamp"
fi
