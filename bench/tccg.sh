#!/bin/bash
# The 48 TCCG contractions at full size against numpy.einsum, a plain GEMM of the same shape and
# the machine's limits, then the cost of tuning some of them (bench/tccg.py says what is
# measured). Arguments go to the script, e.g. --threads 2, --cases 31-48, --tune 1,12,33.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
exec "$PYTHON" bench/tccg.py build/bin/einsumdb "$@"
