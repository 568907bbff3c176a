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
  # --system-site-packages reaches only the base interpreter's packages: where python3 is itself
  # a venv or has user-site packages (as on the lent H200 image), its torch and JAX stay unseen.
  # A .pth file puts every site directory python3 sees after the venv's own.
  site_dir="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  python3 -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
    > "$site_dir/_system_python.pth"
  "$venv/bin/pip" install -q --no-index --find-links "$bundle" setuptools wheel
  # tui-bench and what `pytest -m gpu` needs (the dev extra less its linters, not carried)
  "$venv/bin/pip" install -q --no-index --find-links "$bundle" --no-build-isolation -e . \
    pytest pytest-timeout pytest-asyncio pytest-textual-snapshot hypothesis
fi
exec "$venv/bin/python" benchmarks/gpu_check.py --out "$out" --bundle "$bundle" "${@:3}"
