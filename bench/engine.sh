#!/usr/bin/env bash
# The per-call cost of the library API on small matrix products (2×2 … 16×16, one thread):
# Engine::einsum (subscripts and the caller's arrays every call) and a caller-held Prepared run,
# against the engine's chosen strategy called directly on tensors bound once
# (bench/engine_bench.cpp). Prints the medians of 5 repetitions and the overhead per call.
# Usage: bench/engine.sh [extra Google Benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
out=$(mktemp)
trap 'rm -f "$out"' EXIT
google_benchmark_json "$out" build/bin/engine_bench "$@"
"$PYTHON" - "$out" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
med = {r["run_name"]: r["real_time"] for r in runs if r.get("aggregate_name") == "median"}
unit = {r["run_name"]: r["time_unit"] for r in runs if r.get("aggregate_name") == "median"}
scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
def us(name):
    return med[name] * scale[unit[name]]
print("%-8s %12s %12s %12s %16s %16s" % ("n x n", "direct", "prepared", "einsum",
                                          "prepared - dir.", "einsum - dir."))
for n in (2, 4, 8, 16):
    d, p, e = us("BM_Direct/%d" % n), us("BM_Prepared/%d" % n), us("BM_Einsum/%d" % n)
    print("%-8s %9.3f us %9.3f us %9.3f us %13.3f us %13.3f us" % (
        "%dx%d" % (n, n), d, p, e, p - d, e - d))
print("direct: the chosen strategy on tensors bound once; prepared: Prepared::run on the caller's")
print("memory into the caller's buffer; einsum: Engine::einsum with subscripts every call")
PY
