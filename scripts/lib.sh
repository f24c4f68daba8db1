# shellcheck shell=bash
# Shared helpers for the einsumdb scripts. Source it; do not run it.

# The Python the module is built for and the scripts' Python parts run on: Debian's, which the
# packages below equip (numpy, pybind11, pytest). EINSUMDB_PYTHON names another that has them.
PYTHON=${EINSUMDB_PYTHON:-/usr/bin/python3}

# The Debian packages einsumdb needs to build, test and benchmark.
EINSUMDB_PACKAGES=(
  cmake ninja-build g++ pkg-config python3
  libnauty2-dev libcli11-dev nlohmann-json3-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev sqlite3 libopenblas-dev
  python3-numpy libxtensor-dev libxsmm-dev libblis-serial-dev
  python3-dev python3-pybind11 pybind11-dev pybind11-json-dev python3-pytest python3-tqdm
  python3-pip python3-setuptools python3-wheel
  libopenmpi-dev openmpi-bin libscalapack-openmpi-dev
  chromium fonts-dejavu-core
  libpq-dev postgresql-15
  iproute2 util-linux
  qemu-user binutils
)
# And for the sanitized tree and the fuzzers (scripts/sanitize.sh, scripts/fuzz.sh): clang and its
# sanitizer and libFuzzer runtimes.
EINSUMDB_SANITIZER_PACKAGES=(clang libclang-rt-14-dev)

# Prints the end of a phase of a script with the time since the script started (bash's SECONDS),
# so that a slow phase shows where it is.
phase() { printf 'einsumdb: %s (%dm%02ds)\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }

# Installs the packages that are missing (apt-get, as root or through sudo): EINSUMDB_PACKAGES,
# and EINSUMDB_SANITIZER_PACKAGES too with --sanitizers.
install_deps() {
  local missing=() wanted=("${EINSUMDB_PACKAGES[@]}")
  [ "${1:-}" = --sanitizers ] && wanted+=("${EINSUMDB_SANITIZER_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "einsumdb: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Runs a Google Benchmark binary on one BLAS thread, 5 repetitions, and writes the aggregates as
# JSON to the file named by $1: google_benchmark_json OUT BIN [FLAGS...]
google_benchmark_json() {
  local out=$1 bin=$2
  shift 2
  OPENBLAS_NUM_THREADS=1 "$bin" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_format=json "$@" > "$out"
}

# Both trees the scripts build (Release, sanitized) compile a library's sources eight to a
# unit (a unity build): most of them include nlohmann::json, CLI11 or GoogleTest, whose templates
# each unit otherwise parses, instantiates and optimizes again (and, sanitized, instruments again).
# The kernels compiled once per instruction set keep a unit per source (executor/CMakeLists.txt).
UNITY_BUILD=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)

# Configures and builds the Release tree in build/ (warnings are errors).
build_release() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEINSUMDB_WERROR=ON "${UNITY_BUILD[@]}" \
    -DPython3_EXECUTABLE="$PYTHON" >/dev/null
  cmake --build build -j "$(nproc)"
}

# Configures the sanitized tree in build-asan/ (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, warnings are errors): what the tests run, and the libFuzzer targets
# (scripts/fuzz.sh), which share its libraries. Not the benchmarks (the Release build compiles
# them, and no test runs them) nor the Python module (its tests run against the Release build).
# Line tables are all the sanitizers' reports need (file:line in every frame); full debug
# information makes the compiles a quarter slower and the objects half again as large.
configure_sanitized() {
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEINSUMDB_SANITIZE=ON \
    -DEINSUMDB_FUZZ=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    "${UNITY_BUILD[@]}" -DEINSUMDB_WERROR=ON -DCMAKE_CXX_COMPILER=clang++ -DEINSUMDB_PYTHON=OFF \
    -DPython3_EXECUTABLE="$PYTHON" -DEINSUMDB_BENCHMARKS=OFF >/dev/null
}

# Installs the Python package for the system Python the way a user does (pip, with Debian's
# setuptools and no build isolation), from the CMake tree build_release made (nothing is compiled
# again). Debian marks its Python as externally managed, so pip needs --break-system-packages to
# install into /usr/local.
install_python_package() {
  EINSUMDB_BUILD_DIR="$PWD/build" "$PYTHON" -m pip install --quiet --no-build-isolation \
    --no-deps --break-system-packages --root-user-action=ignore .
}

# A PostgreSQL cluster of its own for a benchmark: start_postgres DIR PORT creates it in DIR
# (initdb, run as the postgres user when we are root, which initdb refuses) and starts it on
# 127.0.0.1:PORT with trust authentication; stop_postgres DIR stops it. The database URI is
# postgresql://einsum@127.0.0.1:PORT/postgres.
postgres_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}
start_postgres() {
  local dir=$1 port=$2 bin as=()
  bin=$(postgres_bin)
  [ -n "$bin" ] || { echo "PostgreSQL is not installed (postgresql-15)" >&2; return 1; }
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U einsum -A trust -E UTF8 >/dev/null
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-k $dir -c listen_addresses=127.0.0.1 -p $port" start >/dev/null
}
stop_postgres() {
  local dir=$1 as=()
  [ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$(postgres_bin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}
