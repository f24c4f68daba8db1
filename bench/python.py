#!/usr/bin/python3
"""einsumdb from Python against numpy.einsum, in one run, one BLAS thread on both sides:

  1. overhead: a repeated small matrix product (2x2 ... 16x16): einsumdb.einsum, a prepared
     einsumdb.contract_expression, and numpy.einsum; the time per call.
  2. speed:    DG-FEM operators (the Feinsum paper's, 10,000 elements) and TCCG-shaped
               contractions, each tuned first into a fresh store (--budget seconds), then
               einsumdb.einsum against numpy.einsum(optimize=True) as it returns (often a
               strided view) and made contiguous (numpy.ascontiguousarray); einsumdb always
               returns a C-contiguous array, so the contiguous column is the like-for-like one.

  3. numpy's contract beyond float arrays of one dtype: the per-call time of a small complex
     product, a mixed float32/float64 one and a broadcasting ellipsis, against numpy.einsum.
  4. as opt_einsum's backend: opt_einsum.contract(..., backend="einsumdb") against its numpy
     backend on multi-operand contractions (opt_einsum from ../shared/python/opt_einsum).

Each time is the median of runs adding up to at least --min-time seconds (at least 5 runs).
--module DIR imports einsumdb from DIR (default: the build tree's build/python), so that two
builds can be compared; --json FILE writes every figure for docs/performance/python.md.
Usage: python.py [--budget S] [--min-time S] [--quick] [--module DIR] [--json FILE]
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
# OpenBLAS picks the kernel for this CPU on both sides: a machine may pin an older one.
for _pin in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_pin, None)

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
_module = sys.argv[sys.argv.index("--module") + 1] if "--module" in sys.argv else \
    str(HERE.parent / "build" / "python")
sys.path.insert(0, _module)
import einsumdb  # noqa: E402

RESULTS = {"module": str(pathlib.Path(einsumdb.__file__).parent), "overhead": [], "speed": [],
           "contract": [], "opt_einsum": []}


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
        RESULTS["overhead"].append({"n": n, "einsumdb_s": t_e, "prepared_s": t_p,
                                    "numpy_s": t_n})


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
            RESULTS["speed"].append({"workload": name, "einsumdb_s": t_e, "numpy_s": t_n,
                                     "numpy_contiguous_s": t_c})
            print("%-34s %8.3f ms %8.3f ms %8.3f ms %8.2fx %8.2fx" % (
                name, t_e * 1e3, t_n * 1e3, t_c * 1e3, t_n / t_e, t_c / t_e))
    g = np.exp(np.mean(np.log(np.array(ratios)), axis=0)) if ratios else (0, 0)
    print("geometric mean: numpy as returned / einsumdb %.2fx, contiguous / einsumdb %.2fx"
          % (g[0], g[1]))
    print("(einsumdb's result is C-contiguous: compare it with the contiguous column)")


def contract(min_time):
    print("\n3. numpy's contract beyond one float dtype: per-call time (one thread)")
    print("%-34s %12s %12s %10s" % ("call", "einsumdb", "numpy", "numpy/edb"))
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    z = a + 1j * b
    calls = [
        ("complex128 4x4 product", "ik,kj->ij", (z, z)),
        ("float32 with float64 4x4 product", "ik,kj->ij", (a.astype(np.float32), b)),
        ("ellipsis, broadcast (8,1,4,4)(3,4,4)", "...ik,...kj->...ij",
         (rng.standard_normal((8, 1, 4, 4)), rng.standard_normal((3, 4, 4)))),
        ("sublists 4x4 product", None, (a, [0, 1], b, [1, 2], [0, 2])),
        ("complex128 64x64 product", "ik,kj->ij",
         (rng.standard_normal((64, 64)) + 1j, rng.standard_normal((64, 64)) - 1j)),
    ]
    k = 500
    for name, sub, ops in calls:
        args = ops if sub is None else (sub,) + tuple(ops)
        try:
            want = np.einsum(*args)
            got = einsumdb.einsum(*args)
            assert np.allclose(got, want), name
        except (TypeError, ValueError, RuntimeError) as e:  # a module without the feature
            print("%-34s %12s" % (name, "refused: " + type(e).__name__))
            RESULTS["contract"].append({"call": name, "refused": str(e)[:200]})
            continue
        t_e = timed(lambda: [einsumdb.einsum(*args) for _ in range(k)], min_time) / k
        t_n = timed(lambda: [np.einsum(*args) for _ in range(k)], min_time) / k
        print("%-34s %9.2f us %9.2f us %9.2fx" % (name, t_e * 1e6, t_n * 1e6, t_n / t_e))
        RESULTS["contract"].append({"call": name, "einsumdb_s": t_e, "numpy_s": t_n})


def opt_einsum_backend(min_time, quick):
    path = HERE.parent.parent / "shared" / "python" / "opt_einsum"
    path = pathlib.Path(os.environ.get("EINSUMDB_OPT_EINSUM", str(path)))
    if not (path / "opt_einsum").exists() or not hasattr(einsumdb, "tensordot"):
        print("\n4. opt_einsum backend: skipped (opt_einsum not at %s, or the module has no "
              "tensordot)" % path)
        return
    sys.path.insert(0, str(path))
    import opt_einsum as oe
    print("\n4. opt_einsum.contract(backend='einsumdb') against backend='numpy' (one thread)")
    print("%-36s %11s %11s %9s" % ("contraction", "einsumdb", "numpy", "np/edb"))
    rng = np.random.default_rng(4)
    cases = [
        ("matrix chain 4 x 400^2", "ij,jk,kl,lm->im", [(400, 400)] * 4),
        ("ring trace 4 x 300^2", "ij,jk,kl,li->", [(300, 300)] * 4),
        ("tensor network 5 ops", "ea,fb,abcd,gc,hd->efgh",
         [(20, 30), (20, 30), (30, 30, 30, 30), (20, 30), (20, 30)]),
        ("batched chain 64 x 3 x 64^2", "bij,bjk,bkl->bil", [(64, 64, 64)] * 3),
    ]
    for name, expr, shapes in cases[:2] if quick else cases:
        ops = [rng.standard_normal(s) for s in shapes]
        got = oe.contract(expr, *ops, backend="einsumdb")
        want = oe.contract(expr, *ops, backend="numpy")
        assert np.allclose(got, want, rtol=1e-8, atol=1e-8 * np.max(np.abs(want))), name
        t_e = timed(lambda: oe.contract(expr, *ops, backend="einsumdb"), min_time)
        t_n = timed(lambda: oe.contract(expr, *ops, backend="numpy"), min_time)
        print("%-36s %8.3f ms %8.3f ms %8.2fx" % (name, t_e * 1e3, t_n * 1e3, t_n / t_e))
        RESULTS["opt_einsum"].append({"contraction": name, "einsumdb_s": t_e, "numpy_s": t_n})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--budget", type=float, default=6.0, help="tuning seconds per workload")
    p.add_argument("--min-time", type=float, default=0.3, help="seconds of timed runs per side")
    p.add_argument("--quick", action="store_true", help="fewer workloads, shorter times")
    p.add_argument("--module", help="import einsumdb from this directory")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--skip-speed", action="store_true", help="leave out section 2 (tuning)")
    a = p.parse_args()
    if a.quick:
        a.budget, a.min_time = 2.0, 0.05
    overhead(a.min_time)
    if not a.skip_speed:
        speed(a.budget, a.min_time, a.quick)
    contract(a.min_time)
    opt_einsum_backend(a.min_time, a.quick)
    if a.json:
        RESULTS["command"] = " ".join(sys.argv)
        RESULTS["numpy"] = np.__version__
        pathlib.Path(a.json).write_text(json.dumps(RESULTS, indent=1) + "\n")


if __name__ == "__main__":
    main()
