#!/usr/bin/env bash
# Canonicalization speed: einsumdb's key method (compact graph, twin rows, sparse nauty) against
# the paper's induced digraph labeled by sparse and by dense nauty, all measured in this run on
# tests/data/bench_canon.jsonl (two-operand contractions with up to 6 indices; b = 64 rows of 4
# operands). Prints per-case medians, the ratios, and checks the targets: <= 20 us for every
# two-operand case and <= 1 ms for b = 64. Usage: bench/canon.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release >/dev/null
repeat="${1:-200}"
bin=build/bin/einsumdb
cases=tests/data/bench_canon.jsonl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$bin bench canon "$cases" --repeat "$repeat" > "$tmp/key.json"
$bin bench canon "$cases" --repeat "$((repeat / 10 + 1))" --labeling nauty-sparse-digraph --no-twin-rows > "$tmp/paper_sparse.json"
$bin bench canon "$cases" --repeat "$((repeat / 10 + 1))" --labeling nauty-dense-digraph --no-twin-rows > "$tmp/paper_dense.json"
python3 - "$tmp" <<'PY'
import json, sys, math
d = sys.argv[1]
key, ps, pd = (json.load(open(f"{d}/{n}.json"))["cases"] for n in ("key", "paper_sparse", "paper_dense"))
print(f"{'case':22} {'rows':>4} {'einsumdb us':>12} {'paper+sparse us':>16} {'paper+dense us':>15} {'x sparse':>9} {'x dense':>9}")
ok = True
ratios_s, ratios_d = [], []
for k, s, n in zip(key, ps, pd):
    rs, rd = s["median_us"] / k["median_us"], n["median_us"] / k["median_us"]
    ratios_s.append(rs); ratios_d.append(rd)
    limit = 20.0 if k["rows"] == 1 and k["operands"] == 2 else 1000.0
    flag = "" if k["median_us"] <= limit else f"  OVER {limit:.0f} us"
    ok = ok and not flag
    print(f"{k['name']:22} {k['rows']:4d} {k['median_us']:12.2f} {s['median_us']:16.2f} {n['median_us']:15.2f} {rs:9.1f} {rd:9.1f}{flag}")
gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))
two = [k["median_us"] for k in key if k["rows"] == 1]
b64 = [k["median_us"] for k in key if k["rows"] == 64]
print(f"two-operand: max median {max(two):.2f} us (target <= 20 us); b=64: max median {max(b64):.1f} us (target <= 1000 us)")
print(f"speed-up over the paper's digraph, geometric mean: {gm(ratios_s):.1f}x (sparse nauty), {gm(ratios_d):.1f}x (dense nauty)")
print("paper's reference (Python implementation): 600-900 us per contraction")
sys.exit(0 if ok else 1)
PY
