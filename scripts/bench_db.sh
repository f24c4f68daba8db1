#!/usr/bin/env bash
# The performance database at scale: fills a fresh file with WORKLOADS distinct workloads and
# MEASUREMENTS measurements (defaults 100,000 and 1,000,000), then measures, in the same run,
#   - recording in batched transactions (10,000 per transaction) against one transaction per
#     measurement (baseline),
#   - best() for a user's spec, including canonicalization and σ translation, against
#     canonicalization alone (baseline).
# Targets: >= 50,000 measurements/s batched; best() median <= 100 us.
# Usage: scripts/bench_db.sh [WORKLOADS] [MEASUREMENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release >/dev/null
workloads="${1:-100000}"
measurements="${2:-1000000}"
out=$(build/bin/einsumdb bench db --workloads "$workloads" --measurements "$measurements")
echo "$out"
python3 - "$out" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
rate, best = j["record_per_second_batched"], j["best_median_us"]
print(f"\nworkloads {j['workloads']}, measurements {j['measurements']}, file {j['db_bytes'] / 2**20:.0f} MiB")
print(f"record: {rate:,.0f}/s batched vs {j['record_per_second_one_per_transaction']:,.0f}/s one per transaction "
      f"({j['record_batched_speedup']:.1f}x); target >= 50,000/s: {'ok' if rate >= 50000 else 'MISSED'}")
print(f"best: median {best:.1f} us, p90 {j['best_p90_us']:.1f} us ({j['best_over_canonicalize']:.1f}x canonicalization "
      f"alone, {j['canonicalize_median_us']:.1f} us); target <= 100 us: {'ok' if best <= 100 else 'MISSED'}")
sys.exit(0 if rate >= 50000 and best <= 100 else 1)
PY
