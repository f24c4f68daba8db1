#!/usr/bin/env bash
# The distributed executor's benchmark (see scripts/bench_distributed.py): the chain
# (A×B)+(C×(D×E)) of Sec. 9 of the EinDecomp paper, square and skewed, at np = 1, 2, 4 —
# einsumdb with the EinDecomp plan against the sqrt and data plans and against ScaLAPACK
# (pdgemm/pdgeadd), one BLAS thread per rank on both sides, all measured in the same run.
# Usage: scripts/bench_distributed.sh [--quick] [--repeat N] [--procs 1,2,4]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
exec /usr/bin/python3 scripts/bench_distributed.py build/bin "$@"
