#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in the sanitized tree, build-asan/, and
# runs each for SECONDS (default 60): spec_fuzz (spec readers, trees, EinGraphs, the planner) and
# executor_fuzz (expressions, .npy files, and every strategy against the reference on small
# einsums).
# A crash, a hang (per-input timeout), a sanitizer report or a broken invariant fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
seconds="${1:-60}"
[ "$seconds" -gt 0 ] || exit 0
install_deps --sanitizers
# The targets live in the sanitized tree (scripts/lib.sh), beside the tests, which
# scripts/sanitize.sh has built before it calls this; built alone, the targets build the
# libraries they need.
configure_sanitized
cmake --build build-asan -j "$(nproc)" --target spec_fuzz executor_fuzz
# The leak check at exit skips the dynamic TLS of libraries loaded at run time (BLIS), as in
# scripts/sanitize.sh, where the reason is given.
export ASAN_OPTIONS="${ASAN_OPTIONS:-intercept_tls_get_addr=0}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The targets run side by side, a process each (target:corpus directory); each one's log is
# shown when it ends, and any failure fails the script.
pids=()
for pair in spec_fuzz:tests/fuzz/corpus executor_fuzz:tests/fuzz/executor_corpus; do
  target=${pair%%:*}
  mkdir -p "$work/$target"
  cp "${pair#*:}"/* "$work/$target"/
  "build-asan/bin/$target" "$work/$target" -max_total_time="$seconds" -timeout=5 -max_len=1024 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-asan/ >"$work/$target.log" 2>&1 &
  pids+=("$!:$target")
done
failed=0
for entry in "${pids[@]}"; do
  target=${entry#*:}
  if wait "${entry%%:*}"; then
    tail -n 12 "$work/$target.log"
    echo "einsumdb: fuzzing $target for ${seconds}s found nothing"
  else
    tail -n 60 "$work/$target.log"
    echo "einsumdb: fuzzing $target failed (its input is in build-asan/)" >&2
    failed=1
  fi
done
exit "$failed"
