#!/usr/bin/env bash
# The performance database at scale: fills a fresh file with WORKLOADS distinct workloads and
# MEASUREMENTS measurements (defaults 100,000 and 1,000,000), then measures, in the same run,
#   - recording in batched transactions (10,000 per transaction) against one transaction per
#     measurement (baseline),
#   - best() for a user's spec, including canonicalization and σ translation, against
#     canonicalization alone (baseline); the lookup of a canonical form alone; sizes never
#     measured (the nearest size); sizes of symbolic workloads; best_many over a batch.
# Targets: >= 50,000 measurements/s batched; best() median <= 20 us and p90 <= 40 us; nearest and
# symbolic answers within twice that (median <= 40 us, p90 <= 80 us); best_many >= 100,000
# answers/s. The ratios to best() of the same run are printed beside them.
# Usage: bench/db.sh [WORKLOADS] [MEASUREMENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release >/dev/null
workloads="${1:-100000}"
measurements="${2:-1000000}"
out=$(build/bin/einsumdb bench db --workloads "$workloads" --measurements "$measurements")
echo "$out"
"$PYTHON" - "$out" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
rate, best, p90 = j["record_per_second_batched"], j["best_median_us"], j["best_p90_us"]
near, sym, many = j["nearest_median_us"], j["symbolic_median_us"], j["best_many_per_second"]
ok = lambda good: "ok" if good else "MISSED"
print(f"\nworkloads {j['workloads']}, measurements {j['measurements']}, file {j['db_bytes'] / 2**20:.0f} MiB")
print(f"record: {rate:,.0f}/s batched vs {j['record_per_second_one_per_transaction']:,.0f}/s one per transaction "
      f"({j['record_batched_speedup']:.1f}x); target >= 50,000/s: {ok(rate >= 50000)}")
print(f"best: median {best:.1f} us, p90 {p90:.1f} us ({j['best_over_canonicalize']:.1f}x canonicalization "
      f"alone, {j['canonicalize_median_us']:.1f} us; lookup alone {j['lookup_median_us']:.1f} us; "
      f"one statement, the floor, {j['statement_median_us']:.1f} us); "
      f"target <= 20 / 40 us: {ok(best <= 20 and p90 <= 40)}")
near90, sym90 = j["nearest_p90_us"], j["symbolic_p90_us"]
near_ok = near <= 40 and near90 <= 80 and sym <= 40 and sym90 <= 80
print(f"nearest size: median {near:.1f} us, p90 {near90:.1f} us ({near / best:.1f}x best()); "
      f"symbolic: median {sym:.1f} us, p90 {sym90:.1f} us ({sym / best:.1f}x best()); "
      f"target <= 40 / 80 us: {ok(near_ok)}")
print(f"best_many: {many:,.0f}/s from canonical forms, {j['best_many_from_specs_per_second']:,.0f}/s from "
      f"specs; target >= 100,000/s: {ok(many >= 100000)}")
sys.exit(0 if rate >= 50000 and best <= 20 and p90 <= 40 and near_ok and many >= 100000 else 1)
PY
