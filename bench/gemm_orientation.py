#!/usr/bin/python3
"""How the orientation of a narrow GEMM's result decides OpenBLAS's speed (executor/product.hpp,
kColumnMajorChunk): the same product C = A·B, M rows much longer than N columns, written once
row-major (as ttgt wrote a result it computes in scratch) and once column-major (C as Cᵀ = Bᵀ·Aᵀ,
as it writes a narrow one now), with A stored [M, K] or [K, M] and B [K, N] or [N, K], through
numpy's matmul on the OpenBLAS it links. Alternating, `--rounds` times; per shape and layout the
time of each orientation and row-major / column-major as min / median / max over the rounds.

Run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset and one thread:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
      bench/gemm_orientation.py --output FILE.json"""
import argparse
import json
import platform
import statistics
import time

import numpy as np

# M, N, K: TCCG case 2's product (dca,bd->abc, A read transposed in place) at its f64 and c128
# sizes, a narrow one of 64 columns, and a square one beside them.
SHAPES = {
    "f64": [(92352, 24, 312), (80000, 64, 200), (2000, 2000, 400)],
    "c128": [(46176, 24, 312), (40000, 64, 200), (1400, 1400, 400)],
}


def timed(f, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best


def spread(values):
    v = sorted(values)
    return [v[0], statistics.median(v), v[-1]]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="the best of this many per figure")
    p.add_argument("--output", help="write the figures here as JSON")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for dtype, shapes in SHAPES.items():
        t = np.dtype({"f64": np.float64, "c128": np.complex128}[dtype])

        def matrix(r, c):
            x = rng.standard_normal((r, c))
            return (x + 1j * rng.standard_normal((r, c))).astype(t) if t.kind == "c" else x

        for m, n, k in shapes:
            for a_layout in ("MK", "KM"):
                for b_layout in ("KN", "NK"):
                    a = matrix(m, k) if a_layout == "MK" else matrix(k, m).T
                    b = matrix(k, n) if b_layout == "KN" else matrix(n, k).T
                    c = np.empty((m, n), t)
                    ct = np.empty((n, m), t)
                    row, col = [], []
                    for _ in range(args.rounds):
                        row.append(timed(lambda: np.matmul(a, b, out=c), args.repeat))
                        col.append(timed(lambda: np.matmul(b.T, a.T, out=ct), args.repeat))
                    if not np.allclose(c, ct.T):
                        raise SystemExit(f"{dtype} {m}x{n}x{k}: the two orientations disagree")
                    ratio = spread([r / q for r, q in zip(row, col)])
                    rows.append({"dtype": dtype, "M": m, "N": n, "K": k, "A": a_layout,
                                 "B": b_layout, "row_major_s": row, "column_major_s": col,
                                 "row_over_column": ratio})
                    print(f"{dtype:4} {m:6}x{n:<5}x{k:<4} A[{a_layout}] B[{b_layout}]  "
                          f"row-major {statistics.median(row) * 1e3:7.1f} ms  column-major "
                          f"{statistics.median(col) * 1e3:7.1f} ms  row / column "
                          + " / ".join(f"{x:.2f}" for x in ratio), flush=True)
    if args.output:
        machine = {"processor": platform.processor() or platform.machine(),
                   "numpy": np.__version__}
        with open(args.output, "w") as f:
            json.dump({"machine": machine, "rounds": args.rounds, "repeat": args.repeat,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
