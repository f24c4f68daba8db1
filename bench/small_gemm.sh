#!/usr/bin/env bash
# Small matrix products on one thread: libxsmm's kernels as the executor calls them against
# OpenBLAS's cblas_dgemm, on the DG-FEM shapes and at the executor's size limit for libxsmm
# (bench/small_gemm_bench.cpp). Prints both timings per shape and their ratio, measured in the
# same run.
# Usage: bench/small_gemm.sh [extra Google Benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
# OpenBLAS picks the kernel for this CPU: a machine may pin an older one.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
out=$(mktemp)
trap 'rm -f "$out"' EXIT
google_benchmark_json "$out" build/bin/small_gemm_bench "$@"
"$PYTHON" - "$out" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
median = {r["run_name"]: r for r in runs if r.get("aggregate_name") == "median"}
print("%-34s %12s %12s %8s" % ("batch x m x n x k", "libxsmm", "OpenBLAS", "ratio"))
for name, x in median.items():
    if not name.startswith("xsmm/"):
        continue
    b = median.get("openblas/" + name[len("xsmm/"):])
    shape = " x ".join(p.split(":")[1] for p in name.split("/")[1:])
    t_x, t_b = x["real_time"], b["real_time"]
    print("%-34s %9.1f us %9.1f us %7.2fx" % (shape, t_x, t_b, t_b / t_x))
print("ratio: OpenBLAS time / libxsmm time (above 1: the executor's path is faster)")
PY
