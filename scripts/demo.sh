#!/usr/bin/env bash
# Installs what einsumdb needs, builds it, and shows its main job so far: two spellings of the
# paper's Figure 1 batched einsum get one canonical form and one key, and the σ maps translate
# between each spelling and the canonical names.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
bin=build/bin/einsumdb

echo
echo "== Figure 1 of the Feinsum paper: the same batched einsum spelled two ways"
a=$(sed -n 1p tests/data/isomorphism.jsonl | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["a"]))')
b=$(sed -n 1p tests/data/isomorphism.jsonl | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["b"]))')
echo "spelling a: $a"
echo "spelling b: $b"
ka=$($bin canon "$a")
kb=$($bin canon "$b")
echo
echo "canonical form and σ maps of spelling a:"
echo "$ka" | python3 -m json.tool
python3 - "$ka" "$kb" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("key a :", a["key"]); print("key b :", b["key"])
print("hash a:", a["hash"]); print("hash b:", b["hash"])
print("equal keys:", a["key"] == b["key"])
idx = {b["sigma"]["index"][c]: a["sigma"]["index"][c] for c in a["sigma"]["index"]}
arr = {b["sigma"]["array"][c]: a["sigma"]["array"][c] for c in a["sigma"]["array"]}
print("index map b -> a:", idx)
print("array map b -> a:", arr)
sys.exit(0 if a["key"] == b["key"] else 1)
PY
echo
echo "== The same computation after breaking one sharing (not isomorphic): a different key"
c=$(sed -n 2p tests/data/isomorphism.jsonl | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["b"]))')
$bin canon "$c" | python3 -c 'import json,sys; print("key   :", json.load(sys.stdin)["key"])'
echo
echo "== Canonicalization speed on the public cases"
$bin bench canon tests/data/isomorphism.jsonl --repeat 200 | python3 -c 'import json,sys; j=json.load(sys.stdin); print("median %.1f us per batched einsum, slowest case %.1f us" % (j["median_us"], j["max_median_us"]))'
