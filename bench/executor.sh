#!/usr/bin/env bash
# The executor's benchmarks (see bench/executor.py): einsumdb against numpy.einsum,
# the roofline fraction, batch_fused against separate calls, and fused functional operands.
# All ratios are measured in the same run on a fresh temporary database.
# Usage: bench/executor.sh [--budget S] [--reps N] [--min-time S] [--quick] [--parts numpy,batched,functional]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
exec "$PYTHON" bench/executor.py build/bin/einsumdb "$@"
