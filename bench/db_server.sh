#!/usr/bin/env bash
# The shared store against the embedded one, in the same run on the same machine: a PostgreSQL
# server started here (its own cluster in a temporary directory, 127.0.0.1, default settings:
# durable commits, fsync on) and a SQLite file, each filled by `einsumdb bench db` with WORKLOADS
# workloads and MEASUREMENTS measurements (defaults 100,000 and 1,000,000), which times
#   - recording in batched runs (10,000 measurements per run, one transaction each),
#   - best() for a user's spec (canonicalization, lookup, translation to the user's names).
# Prints both and the ratios server / SQLite.
# Usage: bench/db_server.sh [WORKLOADS] [MEASUREMENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release >/dev/null
workloads="${1:-100000}"
measurements="${2:-1000000}"
dir=$(mktemp -d /tmp/einsumdb-bench-pg.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
trap 'stop_postgres "$dir"; rm -rf "$dir"' EXIT
# SQLite first: a server that has just taken a million rows keeps working (checkpoints,
# autovacuum) for a while after, and would disturb what runs next on the same cores.
sqlite=$(build/bin/einsumdb bench db --workloads "$workloads" --measurements "$measurements" \
  2>/dev/null)
start_postgres "$dir" "$port"
server=$(build/bin/einsumdb bench db --db "postgresql://einsum@127.0.0.1:$port/postgres" \
  --workloads "$workloads" --measurements "$measurements" 2>/dev/null)
python3 - "$server" "$sqlite" <<'PY'
import json, sys
pg, lite = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"workloads {pg['workloads']}, measurements {pg['measurements']} "
      f"(server {pg['db_bytes'] / 2**20:.0f} MiB, SQLite file {lite['db_bytes'] / 2**20:.0f} MiB)")
print(f"{'':28s}{'PostgreSQL':>14s}{'SQLite':>14s}{'server/SQLite':>16s}")
for name, key, unit in (("record, batched (/s)", "record_per_second_batched", ""),
                        ("record, one per run (/s)", "record_per_second_one_per_transaction", ""),
                        ("best() median (us)", "best_median_us", ""),
                        ("best() p90 (us)", "best_p90_us", "")):
    print(f"{name:28s}{pg[key]:14,.1f}{lite[key]:14,.1f}{pg[key] / lite[key]:15.2f}x")
PY
