#!/usr/bin/env bash
# The distributed executor's benchmark (see bench/distributed.py): the chain
# (A×B)+(C×(D×E)) of Sec. 9 of the EinDecomp paper, square and skewed, at np = 1, 2, 4 —
# einsumdb with the EinDecomp plan (both overlap modes) against the sqrt and data plans, the plan
# re-made from the measurements (--cost measured), ScaLAPACK (pdgemm/pdgeadd), the same DGEMM/add
# calls made directly in one process, and the ideal; one BLAS thread per rank everywhere, all
# measured in the same run, --rounds times (3), each ratio as min / median / max.
# Usage: bench/distributed.sh [--quick] [--repeat N] [--rounds N] [--procs 1,2,4]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
exec "$PYTHON" bench/distributed.py build/bin "$@"
