#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default 60).
# A crash, a hang (per-input timeout), a sanitizer report or a broken invariant fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[ "$seconds" -gt 0 ] || exit 0
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEINSUMDB_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j "$(nproc)"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp tests/fuzz/corpus/* "$corpus"/
build-fuzz/bin/spec_fuzz "$corpus" -max_total_time="$seconds" -timeout=5 -max_len=1024 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/ 2>&1 | tail -n 12
echo "einsumdb: fuzzing for ${seconds}s found nothing"
