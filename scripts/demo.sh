#!/usr/bin/env bash
# Installs what einsumdb needs, builds it, and shows its main job: two spellings of the paper's
# Figure 1 batched einsum get one canonical form and one key; a DG-FEM workload is tuned on this
# machine (every candidate verified and recorded in the embedded SQLite database), and the
# winner is retrieved and run for a renamed, re-ordered spelling of it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release
install_python_package  # import einsumdb, for the system Python, from any directory
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
echo "== The performance database (a fresh SQLite file)"
db=$(mktemp -d)/demo.sqlite
cat > "${db%.sqlite}.jsonl" <<'JSONL'
{"spec": {"einsum": "ik,kj->ij", "batch": [["A","B"]], "shapes": {"A": [64,32], "B": [32,48]}}, "transform": {"name": "ttgt", "params": {"m": [{"index": "i"}], "n": [{"index": "j"}], "k": [{"index": "k"}]}}, "seconds": [1.0e-5, 1.2e-5, 1.1e-5], "status": "ok", "max_rel_err": 1e-15, "run": "demo"}
{"spec": {"einsum": "ik,kj->ij", "batch": [["A","B"]], "shapes": {"A": [64,32], "B": [32,48]}}, "transform": {"name": "reference", "params": {}}, "seconds": [2.1e-3, 2.0e-3], "status": "ok", "max_rel_err": 0, "run": "demo"}
{"spec": {"einsum": "ik,kj->ij", "batch": [["A","B"]], "shapes": {"A": [64,32], "B": [32,48]}}, "transform": {"name": "broken", "params": {}}, "seconds": [1.0e-8], "status": "invalid", "max_rel_err": 0.9, "run": "demo"}
JSONL
echo "recorded for ik,kj->ij with A(64x32), B(32x48):"
$bin record --file "${db%.sqlite}.jsonl" --db "$db" --table
echo
echo "asked for rq,pr->pq with X(32x48), Y(64x32) — the same product, other names:"
$bin best '{"einsum":"rq,pr->pq","batch":[["X","Y"]],"shapes":{"X":[32,48],"Y":[64,32]}}' --db "$db" --top 3 --table
echo
echo "asked for a size never measured (X(32x96)): the nearest size answers, marked approximate:"
$bin best 'rq,pr->pq' --batch X,Y --shape X=32x96 --shape Y=64x32 --db "$db" --table
echo
$bin list --db "$db" --table
echo
echo "== Tuning the DG-FEM face mass operator (P2, 10000 elements) on this machine"
export OPENBLAS_NUM_THREADS=1
face='{"einsum": "fe,ifj,fej->ei", "batch": [["J","M","F"]], "shapes": {"J": [4,10000], "M": [10,4,6], "F": [4,10000,6]}}'
$bin tune "$face" --db "$db" --budget 8 --min-time 0.1 --table --top 8
echo
renamed='{"einsum": "qpk,qp,nqk->pn", "batch": [["U","G","L"]], "shapes": {"U": [4,10000,6], "G": [4,10000], "L": [10,4,6]}}'
echo "the same computation spelled with other names and operand order: $renamed"
$bin best "$renamed" --db "$db" --table
echo
echo "run it (best transform from the database, checked against the reference):"
$bin run "$renamed" --db "$db" --repeat 20 --verify --table
echo
echo "== The same from Python (import einsumdb): numpy.einsum's call, the store's transform"
(cd / && EINSUMDB_DB="$db" OPENBLAS_NUM_THREADS=1 "$PYTHON" -) <<'PY'
import time
import numpy as np
import einsumdb

rng = np.random.default_rng(0)
U, G, L = rng.random((4, 10000, 6)), rng.random((4, 10000)), rng.random((10, 4, 6))
expr = einsumdb.contract_expression("qpk,qp,nqk->pn", U.shape, G.shape, L.shape)
print(">>> einsumdb.contract_expression('qpk,qp,nqk->pn', ...).choice")
print(expr.choice)
got = einsumdb.einsum("qpk,qp,nqk->pn", U, G, L)
want = np.einsum("qpk,qp,nqk->pn", U, G, L, optimize=True)
print("equal to numpy.einsum:", np.allclose(got, want))
def best_of(f, n=20):
    times = []
    for _ in range(n):
        t0 = time.perf_counter(); f(); times.append(time.perf_counter() - t0)
    return min(times)
te = best_of(lambda: einsumdb.einsum("qpk,qp,nqk->pn", U, G, L))
tn = best_of(lambda: np.einsum("qpk,qp,nqk->pn", U, G, L, optimize=True))
print("einsumdb.einsum %.3f ms, numpy.einsum(optimize=True) %.3f ms (best of 20)" % (te * 1e3, tn * 1e3))
PY
echo
echo "== Canonicalization speed on the public cases"
$bin bench canon tests/data/isomorphism.jsonl --repeat 200 | python3 -c 'import json,sys; j=json.load(sys.stdin); print("median %.1f us per batched einsum, slowest case %.1f us" % (j["median_us"], j["max_median_us"]))'
echo
echo "== Planning the chain (A x B) + (C x (D x E)) of the EinDecomp paper for 8 processes"
cat > "${db%.sqlite}-chain.json" <<'JSON'
{"inputs": {"A": {"shape": [1000, 100]}, "B": {"shape": [100, 1000]}, "C": {"shape": [1000, 100]},
            "D": {"shape": [100, 10000]}, "E": {"shape": [10000, 1000]}},
 "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
           {"name": "DE", "einsum": "ij,jk->ik", "inputs": ["D", "E"]},
           {"name": "CDE", "einsum": "ij,jk->ik", "inputs": ["C", "DE"]},
           {"name": "Z", "einsum": "ij,ij->ij", "inputs": ["AB", "CDE"], "join": "add"}]}
JSON
$bin plan "${db%.sqlite}-chain.json" --procs 8 --db "$db" --record --table
echo
echo "== Running that chain on 2 MPI ranks with its EinDecomp plan, checked against one process"
$bin plan "${db%.sqlite}-chain.json" --procs 2 --output "${db%.sqlite}-plan2.json" --json >/dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --allow-run-as-root -np 2 \
  $bin run "${db%.sqlite}-chain.json" --plan "${db%.sqlite}-plan2.json" --db "$db" \
  --repeat 5 --verify --table
echo
echo "== Feinsum's own facts (9,036 GPU measurements) imported; its DG-FEM face operator asked for"
echo "   in other names, with the element count symbolic"
$bin import --from feinsum tests/data/feinsum/transform_archive_v6.sqlite --db "$db" --table
$bin best '{"einsum":"qvr,pqr,qv->vp","batch":[["u2","M","J"],["u0","M","J"],["u3","M","J"],["u1","M","J"]],
  "shapes":{"M":[35,4,15],"J":[4,"elements"],"u0":[4,"elements",15],"u1":[4,"elements",15],
  "u2":[4,"elements",15],"u3":[4,"elements",15]}}' --machine model=NVIDIA_TITAN_V --db "$db" --table
echo
echo "== The database as pictures: this machine's roofline first, Feinsum's GPU as one device of"
echo "   nine drivers, strategies against the roof, two of its drivers side by side (550.163.01"
echo "   against 470.256.02: their fingerprints' prefixes), every candidate, the partitionings"
$bin report --db "$db" -o "${db%.sqlite}-report.html" --compare 2a432c64 84eda244 --table
