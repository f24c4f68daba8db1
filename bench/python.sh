#!/usr/bin/env bash
# einsumdb's Python module against numpy.einsum: per-call overhead on small products and speed
# on DG-FEM and TCCG-shaped contractions (bench/python.py; pass --quick for a short run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
exec "$PYTHON" bench/python.py "$@"
