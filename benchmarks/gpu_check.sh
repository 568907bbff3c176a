#!/usr/bin/env bash
# GPU check on a lent CUDA machine with no network: a venv over the system Python's packages (its
# CUDA torch and JAX), tui-bench installed into it from the carried wheels, then the check.
#   bash benchmarks/gpu_check.sh OUT_DIR [BUNDLE_DIR]    (bundle: python benchmarks/gpu_check.py
#                                                         --make-bundle .gpu-bundle, made here)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: gpu_check.sh OUT_DIR [BUNDLE_DIR]}"
bundle="${2:-.gpu-bundle}"
venv="${GPU_CHECK_VENV:-/tmp/tui-bench-gpu-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --no-index --find-links "$bundle" setuptools wheel
  # tui-bench and what `pytest -m gpu` needs (the dev extra less its linters, not carried)
  "$venv/bin/pip" install -q --no-index --find-links "$bundle" --no-build-isolation -e . \
    pytest pytest-timeout pytest-asyncio pytest-textual-snapshot hypothesis
fi
exec "$venv/bin/python" benchmarks/gpu_check.py --out "$out" --bundle "$bundle" "${@:3}"
