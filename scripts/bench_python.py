#!/usr/bin/python3
"""einsumdb from Python against numpy.einsum, in one run, one BLAS thread on both sides:

  1. overhead: a repeated small matrix product (2x2 ... 16x16): einsumdb.einsum, a prepared
     einsumdb.contract_expression, and numpy.einsum; the time per call.
  2. speed:    DG-FEM operators (the Feinsum paper's, 10,000 elements) and TCCG-shaped
               contractions, each tuned first into a fresh store (--budget seconds), then
               einsumdb.einsum against numpy.einsum(optimize=True) as it returns (often a
               strided view) and made contiguous (numpy.ascontiguousarray); einsumdb always
               returns a C-contiguous array, so the contiguous column is the like-for-like one.

Each time is the median of runs adding up to at least --min-time seconds (at least 5 runs).
Usage: bench_python.py [--budget S] [--min-time S] [--quick]
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "build" / "python"))
import einsumdb  # noqa: E402


def timed(f, min_time, reps=5):
    f()  # warm
    times, total = [], 0.0
    while len(times) < reps or total < min_time:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
        total += times[-1]
    return float(np.median(times))


def overhead(min_time):
    print("1. per-call time of a repeated small matrix product (one thread)")
    print("%-8s %12s %12s %12s %10s" % ("n x n", "einsumdb", "prepared", "numpy", "numpy/edb"))
    rng = np.random.default_rng(1)
    for n in (2, 4, 8, 16):
        a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        expr = einsumdb.contract_expression("ik,kj->ij", (n, n), (n, n))
        # Many calls per sample: the clock's resolution is not what is measured.
        k = 2000
        t_e = timed(lambda: [einsumdb.einsum("ik,kj->ij", a, b) for _ in range(k)], min_time) / k
        t_p = timed(lambda: [expr(a, b) for _ in range(k)], min_time) / k
        t_n = timed(lambda: [np.einsum("ik,kj->ij", a, b) for _ in range(k)], min_time) / k
        print("%-8s %9.2f us %9.2f us %9.2f us %9.2fx" % (
            "%dx%d" % (n, n), t_e * 1e6, t_p * 1e6, t_n * 1e6, t_n / t_e))


def cases(quick):
    out = []
    dg = [json.loads(line) for line in (HERE.parent / "tests" / "data" / "dgfem.jsonl").open()]
    for c in dg:
        name = c["name"]
        if name.endswith("_b1") and ("P2" in name or "P3" in name):
            out.append((name, c["spec"]))
    tccg = [
        ("tccg abc,bda->dc", "abc,bda->dc", {"A": [312, 24, 296], "B": [24, 312, 312]}),
        ("tccg abcd,dbea->ec", "abcd,dbea->ec", {"A": [72, 72, 24, 72], "B": [72, 72, 72, 72]}),
        ("tccg degc,gfab->abcdef (scaled)", "degc,gfab->abcdef",
         {"A": [19, 13, 19, 13], "B": [19, 13, 13, 13]}),
        ("tccg ab,cad->dcb", "ab,cad->dcb", {"A": [384, 312], "B": [296, 384, 312]}),
    ]
    for name, einsum, shapes in tccg:
        out.append((name, {"einsum": einsum, "batch": [list(shapes)], "shapes": shapes}))
    return out[:3] if quick else out


def speed(budget, min_time, quick):
    print("\n2. einsumdb.einsum (tuned) against numpy.einsum(optimize=True), one thread")
    print("%-34s %11s %11s %11s %9s %9s" % ("workload", "einsumdb", "numpy", "np contig.",
                                            "np/edb", "contig/edb"))
    rng = np.random.default_rng(2)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.sqlite")
        for name, spec in cases(quick):
            einsumdb.tune(spec, db=db, budget=budget, min_time=0.1, warmup=1, min_reps=3,
                          progress=False)
            arrays = {k: rng.standard_normal(s) for k, s in spec["shapes"].items()}
            ops = [arrays[n] for n in spec["batch"][0]]
            e = spec["einsum"]
            got = einsumdb.einsum(e, *ops, db=db)
            want = np.einsum(e, *ops, optimize=True)
            assert np.allclose(got, want, rtol=1e-9, atol=1e-9 * np.max(np.abs(want))), name
            t_e = timed(lambda: einsumdb.einsum(e, *ops, db=db), min_time)
            t_n = timed(lambda: np.einsum(e, *ops, optimize=True), min_time)
            t_c = timed(lambda: np.ascontiguousarray(np.einsum(e, *ops, optimize=True)), min_time)
            ratios.append((t_n / t_e, t_c / t_e))
            print("%-34s %8.3f ms %8.3f ms %8.3f ms %8.2fx %8.2fx" % (
                name, t_e * 1e3, t_n * 1e3, t_c * 1e3, t_n / t_e, t_c / t_e))
    g = np.exp(np.mean(np.log(np.array(ratios)), axis=0)) if ratios else (0, 0)
    print("geometric mean: numpy as returned / einsumdb %.2fx, contiguous / einsumdb %.2fx"
          % (g[0], g[1]))
    print("(einsumdb's result is C-contiguous: compare it with the contiguous column)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--budget", type=float, default=6.0, help="tuning seconds per workload")
    p.add_argument("--min-time", type=float, default=0.3, help="seconds of timed runs per side")
    p.add_argument("--quick", action="store_true", help="fewer workloads, shorter times")
    a = p.parse_args()
    if a.quick:
        a.budget, a.min_time = 2.0, 0.05
    overhead(a.min_time)
    speed(a.budget, a.min_time, a.quick)


if __name__ == "__main__":
    main()
