#!/usr/bin/env bash
# Installs what einsumdb needs, builds the sanitized tree (build-asan/: clang, AddressSanitizer +
# UndefinedBehaviorSanitizer, warnings are errors) and runs the test suite in it, then fuzzes the
# spec readers and the executor (scripts/fuzz.sh, its targets in the same tree). Exits non-zero
# on any failure. CI runs it after scripts/test.sh (.ci/run).
#   EINSUMDB_FUZZ_SECONDS=N   fuzzing time per target, the targets side by side (default 60; 0
#                             skips)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
export OPENBLAS_NUM_THREADS=1

install_deps --sanitizers
phase "dependencies installed"
configure_sanitized
cmake --build build-asan -j "$(nproc)"
phase "sanitizer build"
# intercept_tls_get_addr=0: the leak check does not follow the dynamic TLS of libraries loaded
# at run time (BLIS, dlopen'ed by tensor_gemm). Following it, clang 14's LeakSanitizer can read a
# stale range there at exit after a run on two threads ("Tracer caught signal 11") and fail a
# test that passed. The static TLS of the libraries linked at start (nauty's workspaces) is
# still scanned.
ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 900
phase "sanitizer tests"
scripts/fuzz.sh "${EINSUMDB_FUZZ_SECONDS:-60}"
phase "fuzzing"
echo "einsumdb: all tests passed under the sanitizers"
