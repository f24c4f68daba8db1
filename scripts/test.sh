#!/usr/bin/env bash
# Installs what einsumdb needs, builds it, and runs the whole test suite on the Release build:
# the unit, property, CLI, MPI, cluster, PostgreSQL, report and Python tests, the Python package
# installed with pip, and the example built against the installed C++ package. Exits non-zero on
# any failure. scripts/sanitize.sh runs the same tests again under the sanitizers, and fuzzes;
# CI runs both (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
export OPENBLAS_NUM_THREADS=1

install_deps
phase "dependencies installed"
build_release
phase "Release build"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
phase "Release tests"

# The Python package as a user installs it: pip install ., then the pytest suite against the
# installed package (run from outside the tree, so that nothing else is imported), then pip
# uninstall removes it and the package is installed again for what follows.
install_python_package
repo=$PWD
outside=$(mktemp -d)
(cd "$outside" && EINSUMDB_EXPECT_INSTALLED=1 EINSUMDB_BIN="$repo/build/bin/einsumdb" \
  "$PYTHON" -m pytest -q -p no:cacheprovider "$repo/tests/python")
rmdir "$outside"
"$PYTHON" -m pip uninstall --quiet -y --break-system-packages --root-user-action=ignore einsumdb
if (cd / && "$PYTHON" -c 'import einsumdb' 2>/dev/null); then
  echo "einsumdb: pip uninstall left the package importable" >&2
  exit 1
fi
install_python_package
phase "the Python package installs with pip, passes its tests installed, and uninstalls"

# The installed package: the example builds against the install alone, through CMake's
# find_package and through pkg-config, and runs.
pfx=$(mktemp -d)
cmake --install build --prefix "$pfx" >/dev/null
cmake -S examples -B "$pfx/example" -G Ninja -DCMAKE_PREFIX_PATH="$pfx" >/dev/null
cmake --build "$pfx/example"
EINSUMDB_DB="$pfx/none.sqlite" "$pfx/example/matmul"
# shellcheck disable=SC2046
g++ -std=c++20 -O2 examples/matmul.cpp -o "$pfx/matmul-pc" \
  $(PKG_CONFIG_PATH="$pfx/lib/pkgconfig" pkg-config --cflags --libs --static einsumdb)
EINSUMDB_DB="$pfx/none.sqlite" "$pfx/matmul-pc" >/dev/null
rm -rf "$pfx"
phase "the installed package builds and runs the example"

echo "einsumdb: all tests passed"
