#!/usr/bin/env bash
# The planner's figures, measured in one run: predicted communication (numbers moved) of the
# EinDecomp plan against the sqrt and data baselines for the chain (A×B)+(C×(D×E)) of Sec. 9 of
# the EinDecomp paper, square (all s×s) and skewed (A: s×0.1s, B: 0.1s×s, C: s×0.1s,
# D: 0.1s×10s, E: 10s×s), at P = 4, 8, 16; and the planning time of 500-node graphs (a forest of
# chains, planned exactly, and a DAG with shared results, linearized) at P = 16.
# Target: planning under 1 s. Usage: bench/plan.sh [s] [nodes]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release >/dev/null
build/bin/einsumdb bench plan --s "${1:-10000}" --nodes "${2:-500}" --procs 16
