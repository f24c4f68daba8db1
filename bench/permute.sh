#!/usr/bin/env bash
# A tensor's permutation (kernels::copy_layout: ttgt's packing and write-back, the engine taking
# a caller's strided array) against a plain copy of the same bytes measured in the same run:
# glibc's memcpy and a vector copy (bench/permute_bench.cpp); and the same permutation split
# between two threads (kernels::copy_strided, as ttgt packs on two). Each round runs every method
# on every workload (median of 3 repetitions); printed: min / median / max over the rounds of the
# time ratios, and copy_layout's speed in GB/s (bytes read + written).
# Usage: bench/permute.sh [ROUNDS=3] [extra Google Benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
rounds=${1:-3}
shift || true
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for r in $(seq "$rounds"); do
  echo "round $r of $rounds" >&2
  OPENBLAS_NUM_THREADS=1 build/bin/permute_bench --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_format=json "$@" > "$dir/$r.json"
done
"$PYTHON" - "$dir" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
per = []  # per round: {(method, workload): (seconds, bytes/s)}
for r in range(1, rounds + 1):
    runs = json.load(open("%s/%d.json" % (d, r)))["benchmarks"]
    m = {}
    for x in runs:
        if x.get("aggregate_name") != "median":
            continue
        method, workload = x["run_name"].split("/")[:2]
        m[(method, workload)] = (x["real_time"], x["bytes_per_second"])
    per.append(m)
def spread(v):
    return "%.2f / %.2f / %.2f" % (min(v), statistics.median(v), max(v))
workloads = [w for (m, w) in per[0] if m == "copy_layout"]
print("%-24s %-20s %-20s %-20s %-20s %-20s" % ("workload", "layout / memcpy", "layout / vector copy",
                                         "elementwise / layout", "layout / two threads", "layout GB/s"))
worst = []
for w in workloads:
    t = lambda m: [p[(m, w)][0] for p in per]
    lay, mc, vc, el = t("copy_layout"), t("memcpy"), t("vector_copy"), t("elementwise")
    two = t("two_threads")
    a = [x / y for x, y in zip(lay, mc)]
    worst.append(statistics.median(a))
    print("%-24s %-20s %-20s %-20s %-20s %-20s" % (w, spread(a), spread([x / y for x, y in zip(lay, vc)]),
          spread([x / y for x, y in zip(el, lay)]), spread([x / y for x, y in zip(lay, two)]),
          spread([p[("copy_layout", w)][1] / 1e9 for p in per])))
print("min / median / max over %d rounds; time ratios (below 1: copy_layout faster; "
      "layout / two threads: above 1, two threads faster)" % rounds)
print("memcpy's speed in these rounds: %s GB/s (read + written)" %
      spread([p[("memcpy", w)][1] / 1e9 for p in per for w in workloads]))
print("within 1.5x of memcpy on the median: %d of %d workloads" %
      (sum(x <= 1.5 for x in worst), len(worst)))
PY
