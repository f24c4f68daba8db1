#!/usr/bin/python3
"""The executor's benchmarks, all measured in one run on one database (a fresh temporary one):

  1. numpy:      einsumdb's best recorded transform against numpy.einsum(..., optimize=True) on
                 the DG-FEM workloads of the Feinsum paper (b = 1) and a table of two-operand
                 contractions; both sides single-threaded BLAS, the same input arrays, and the
                 results compared element by element.
  2. roofline:   the fraction of the machine's roofline each best transform reaches in the timed
                 run of part 1; geometric mean over the cases whose roofline is the GEMM peak.
  3. batched:    DG-FEM face mass, divergence and gradient with b = 1, 2, 4, 8, 16 rows that
                 share their geometric factors and operator matrices: the best batch_fused
                 transform against the b rows run one after another with the best transform of
                 the single-row workload; and the tuner's best transform of any strategy for
                 the batched workload against the same.
  4. functional: operands that are expressions of arrays (2*A+1, sin(q), A*A) evaluated inside
                 the best transform, against the same transform on arrays materialized
                 beforehand (each side run three times, alternately; the faster of each).

Every time is the median of at least --reps runs that add up to at least --min-time seconds.

Usage: executor.py EINSUMDB [--budget S] [--reps N] [--min-time S] [--quick]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

# One BLAS thread on numpy's side too (set before numpy loads its BLAS).
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
# OpenBLAS picks the kernel for this CPU on both sides: a machine may pin an older one.
for _pin in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_pin, None)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DGFEM = os.path.join(HERE, "..", "tests", "data", "dgfem.jsonl")

TWO_OPERAND = [
    ("matmul 1024", "ik,kj->ij", {"A": [1024, 1024], "B": [1024, 1024]}),
    ("matmul 2000x300x2000", "ik,kj->ij", {"A": [2000, 300], "B": [300, 2000]}),
    ("transposed 1024", "ki,jk->ij", {"A": [1024, 1024], "B": [1024, 1024]}),
    ("abc,cd->abd", "abc,cd->abd", {"A": [64, 64, 256], "B": [256, 256]}),
    ("abcd,dbe->aec", "abcd,dbe->aec", {"A": [48, 32, 48, 32], "B": [32, 32, 64]}),
    ("batched bik,bkj->bij", "bik,bkj->bij", {"A": [64, 128, 128], "B": [64, 128, 128]}),
    ("matvec 4000", "ij,j->i", {"A": [4000, 4000], "B": [4000]}),
    ("tensor-matrix ijk,kl->ijl", "ijk,kl->ijl", {"A": [128, 128, 128], "B": [128, 128]}),
    ("ab,bcd->acd", "ab,bcd->acd", {"A": [256, 256], "B": [256, 64, 64]}),
]


def run(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    return p.stdout


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def time_numpy(expr, ops, reps, min_time):
    """The median of at least `reps` runs that take at least `min_time` seconds in all, as
    einsumdb run --repeat --min-time measures its side."""
    np.einsum(expr, *ops, optimize=True)
    ts = []
    while len(ts) < reps or sum(ts) < min_time:
        t = time.perf_counter()
        np.einsum(expr, *ops, optimize=True)
        ts.append(time.perf_counter() - t)
    return median(ts)


class Bench:
    def __init__(self, args):
        self.bin = args.einsumdb
        self.budget = args.budget
        self.reps = args.reps
        self.min_time = args.min_time
        self.dir = tempfile.mkdtemp(prefix="einsumdb_bench_")
        self.env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
                        EINSUMDB_DB=os.path.join(self.dir, "bench.sqlite"))
        self.rng = np.random.default_rng(7)
        self.tuned = {}

    def tune(self, spec, strategies=None):
        key = json.dumps(spec, sort_keys=True) + str(strategies)
        if key not in self.tuned:
            cmd = [self.bin, "tune", json.dumps(spec), "--json", "--no-progress", "--budget",
                   str(self.budget), "--warmup", "2", "--min-reps", "5", "--min-time", "0.05"]
            if strategies:
                cmd += ["--strategies", strategies]
            self.tuned[key] = json.loads(run(cmd, self.env))
        return self.tuned[key]

    def arrays(self, spec):
        """Random inputs for every array a spec reads, saved as .npy; returns {name: array}."""
        out = {}
        shapes = spec["shapes"]
        for name, shape in shapes.items():
            a = self.rng.random(shape)
            out[name] = a
            np.save(os.path.join(self.dir, name + ".npy"), a)
        return out

    def einsumdb_run(self, spec, arrays, extra=()):
        out = os.path.join(self.dir, "out.npy")
        cmd = [self.bin, "run", json.dumps(spec), "--json", "--repeat", str(self.reps),
               "--min-time", str(self.min_time), "--output", out, "--inputs"] + \
            ["%s=%s" % (n, os.path.join(self.dir, n + ".npy")) for n in arrays] + list(extra)
        r = json.loads(run(cmd, self.env))
        outs = r["outputs"]
        return r, [np.load(p) for p in outs]


def dgfem_cases(b):
    cases = []
    with open(DGFEM) as f:
        for line in f:
            c = json.loads(line)
            if c["name"].endswith("_b%d" % b):
                cases.append((c["name"], c["spec"]))
    return cases


def part_numpy(bench, quick):
    print("== 1. einsumdb's best transform against numpy.einsum(optimize=True), one BLAS thread")
    cases = [(n, s) for n, s in dgfem_cases(1)]
    cases += [(name, {"einsum": e, "batch": [list(shapes)], "shapes": shapes, "dtype": "f64"})
              for name, e, shapes in TWO_OPERAND]
    if quick:
        cases = cases[::4]
    rows, ratios, fractions_gemm = [], [], []
    for name, spec in cases:
        tuned = bench.tune(spec)  # the run below takes its best transform from the database
        arrays = bench.arrays(spec)
        r, outs = bench.einsumdb_run(spec, arrays)
        ops = [arrays[n] for n in spec["batch"][0]]
        want = np.einsum(spec["einsum"], *ops, optimize=True)
        match = np.allclose(outs[0], want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
        t_np = time_numpy(spec["einsum"], ops, bench.reps, bench.min_time)
        ratio = t_np / r["median_s"]
        ratios.append(ratio)
        roof = tuned["roofline"]
        # The roofline's work: FLOPs of the cheapest pairwise order (see einsumdb tune). The
        # fraction is that of the timed run above (the same time as the einsumdb column), against
        # the roofline of the transform's thread count.
        intensity = tuned["work_flops"] / tuned["footprint_bytes"]
        gemm_bound = intensity * roof["bandwidth_gbs"] >= roof["peak_gflops_per_core"]
        threads = r["transform"]["params"].get("threads", 1)
        attainable = min(roof["peak_gflops_per_core"] * threads,
                         intensity * roof["bandwidth_gbs"])
        fraction = tuned["work_flops"] / r["median_s"] * 1e-9 / attainable
        if gemm_bound and fraction:
            fractions_gemm.append(fraction)
        rows.append((name, r["median_s"], t_np, ratio, r["transform"]["strategy"],
                     fraction, "GEMM" if gemm_bound else "memory", match))
    print("%-28s %11s %11s %7s  %-17s %9s %7s %s" % ("case", "einsumdb", "numpy", "ratio",
                                                    "transform", "roofline", "bound", "match"))
    for name, t, t_np, ratio, strategy, fraction, bound, match in rows:
        print("%-28s %9.3f ms %9.3f ms %6.2fx  %-17s %8s %7s %s" % (
            name, 1e3 * t, 1e3 * t_np, ratio, strategy,
            "%.0f%%" % (100 * fraction) if fraction else "-", bound, "yes" if match else "NO"))
    print("geometric mean ratio numpy/einsumdb: %.2fx over %d cases; slowest case %.2fx"
          % (geomean(ratios), len(ratios), min(ratios)))
    print("all results match numpy: %s" % all(r[-1] for r in rows))
    print("== 2. roofline: geometric mean fraction on the %d GEMM-bound cases: %.0f%%\n"
          % (len(fractions_gemm), 100 * geomean(fractions_gemm)))
    return all(r[-1] for r in rows)


def shared_spec(einsum, shared, shared_shape, varying_shape, b):
    rows = [[shared, "X%d" % r] for r in range(b)]
    shapes = {shared: shared_shape}
    shapes.update({"X%d" % r: varying_shape for r in range(b)})
    return {"einsum": einsum, "batch": rows, "shapes": shapes, "dtype": "f64"}


def describe(params):
    """A transform's distinguishing parameters, briefly (inner strategy, tile)."""
    out = []
    if "inner" in params:
        out.append(params["inner"])
    if "tile" in params:
        out.append("tile=%s:%d" % (params["tile"][0]["index"], params["tile"][1]))
    return " ".join(out)


def part_batched(bench, quick):
    print("== 3. batch_fused against the b rows run one by one with the best single-row "
          "transform;\n   and the tuner's best transform for the batched workload (any "
          "strategy) against the same")
    print("%-34s %3s %12s %12s %7s %12s %7s  %s" % (
        "workload", "b", "separate", "batch_fused", "ratio", "best", "ratio", "fused / best"))
    bs = [1, 2, 4, 8, 16] if not quick else [1, 4]
    families = []
    for op in ["face_mass", "divergence", "gradient"]:
        families.append(("DG-FEM %s P3, e=10000" % op,
                         lambda b, op=op: dict(dgfem_cases(b))[op + "_P3_b%d" % b]))
    families.append(("matvec, shared 4000x4000 matrix",
                     lambda b: shared_spec("ij,j->i", "A", [4000, 4000], [4000], b)))
    families.append(("GEMM, shared 1024x256 factor",
                     lambda b: shared_spec("ik,kj->ij", "A", [1024, 256], [256, 256], b)))
    for label, make in families:
        best1 = bench.tune(make(1))["results"][0]
        for b in bs:
            spec = make(b)
            arrays = bench.arrays(spec)
            sep, sep_out = bench.einsumdb_run(
                spec, arrays, ["--transform", best1["strategy"], "--params",
                               json.dumps(best1["params"])])
            if b == 1:
                print("%-34s %3d %9.3f ms %12s %7s %12s %7s  %s" % (
                    label, b, 1e3 * sep["median_s"], "-", "-", "-", "-",
                    "(one row: nothing to fuse)"))
                continue
            fused_best = bench.tune(spec, "batch_fused")["results"][0]
            fused, fused_out = bench.einsumdb_run(
                spec, arrays, ["--transform", "batch_fused", "--params",
                               json.dumps(fused_best["params"])])
            bench.tune(spec)  # every strategy; the run below takes the database's best
            best, best_out = bench.einsumdb_run(spec, arrays)  # the database's best
            for x, y, z in zip(sep_out, fused_out, best_out):
                assert np.allclose(x, y, rtol=1e-10), "batch_fused differs"
                assert np.allclose(x, z, rtol=1e-10), "the best transform differs"
            print("%-34s %3d %9.3f ms %9.3f ms %6.2fx %9.3f ms %6.2fx  %s / %s %s" % (
                label, b, 1e3 * sep["median_s"], 1e3 * fused["median_s"],
                sep["median_s"] / fused["median_s"], 1e3 * best["median_s"],
                sep["median_s"] / best["median_s"], describe(fused_best["params"]),
                best["transform"]["strategy"], describe(best["transform"]["params"])))
    print()


def part_functional(bench, quick):
    print("== 4. functional operands fused into the transform against materialized arrays")
    cases = [
        ("2*A+1 in a 1024 GEMM", "ik,kj->ij", {"A": [1024, 1024], "B": [1024, 1024]},
         {"F": "2*A+1"}, ["F", "B"]),
        ("sin(q) in a 4000 matvec", "ij,j->i", {"M": [4000, 4000], "q": [4000]},
         {"S": "sin(q)"}, ["M", "S"]),
        ("A*A in a 2000x300x2000 GEMM", "ik,kj->ij", {"A": [2000, 300], "B": [300, 2000]},
         {"F": "A*A"}, ["F", "B"]),
        ("U*U-1 in DG-FEM gradient P3", "xre,rij,ej->xei",
         {"J": [3, 3, 10000], "D": [3, 20, 20], "U": [10000, 20]}, {"G": "U*U-1"},
         ["J", "D", "G"]),
        ("2*K-1 (as J) in DG-FEM gradient P3", "xre,rij,ej->xei",
         {"K": [3, 3, 10000], "D": [3, 20, 20], "G": [10000, 20]}, {"J": "2*K-1"},
         ["J", "D", "G"]),
        ("exp(-U) in DG-FEM gradient P3 (*)", "xre,rij,ej->xei",
         {"J": [3, 3, 10000], "D": [3, 20, 20], "U": [10000, 20]}, {"G": "exp(-U)"},
         ["J", "D", "G"]),
    ]
    if quick:
        cases = cases[:2]
    print("%-30s %12s %12s %7s  %s" % ("case", "materialized", "fused", "ratio", "transform"))
    ratios = []
    for name, e, shapes, functions, row in cases:
        functional = {"einsum": e, "batch": [row], "shapes": shapes, "functions": functions}
        # The idealized einsum: each function an array of its argument's shape.
        ideal_shapes = {}
        for n in row:
            src = n if n not in functions else next(a for a in shapes if a in functions[n])
            ideal_shapes[n] = shapes[src]
        ideal = {"einsum": e, "batch": [row], "shapes": ideal_shapes}
        best = bench.tune(ideal)["results"][0]
        transform = ["--transform", best["strategy"], "--params", json.dumps(best["params"])]
        arrays = bench.arrays(functional)
        materialized = {}
        env = {"sin": np.sin, "exp": np.exp, "np": np}
        for n in row:
            if n in functions:
                src = next(a for a in shapes if a in functions[n])
                materialized[n] = eval(functions[n].replace("^", "**"),
                                       dict(env, **{src: arrays[src]}))
            else:
                materialized[n] = arrays[n]
        for n, a in materialized.items():
            np.save(os.path.join(bench.dir, n + ".npy"), a)
        # Both sides alternately, three times each; the faster median of each side (the two
        # sides differ by a few percent, less than this machine's drift between runs).
        t_fused, t_plain = [], []
        for _ in range(3):
            fused, fused_out = bench.einsumdb_run(functional, arrays, transform)
            plain, plain_out = bench.einsumdb_run(ideal, materialized, transform)
            assert np.allclose(fused_out[0], plain_out[0], rtol=1e-10), name
            t_fused.append(fused["median_s"])
            t_plain.append(plain["median_s"])
        ratio = min(t_fused) / min(t_plain)
        ratios.append(ratio)
        tile = best["params"].get("tile")
        print("%-30s %9.3f ms %9.3f ms %6.2fx  %s%s" % (
            name, 1e3 * min(t_plain), 1e3 * min(t_fused), ratio, best["strategy"],
            " tile=%s:%d" % (tile[0]["index"], tile[1]) if tile else ""))
    arithmetic = [r for (c, r) in zip(cases, ratios) if "(*)" not in c[0]]
    print("worst fused/materialized ratio, arithmetic expressions: %.2fx" % max(arithmetic))
    print("(*) a transcendental function adds the time of its own evaluation (200,000 "
          "exponentials here), which the materialized run does not pay\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("einsumdb")
    ap.add_argument("--budget", type=float, default=4.0, help="tuning seconds per workload")
    ap.add_argument("--reps", type=int, default=15, help="timed runs per measurement, at least")
    ap.add_argument("--min-time", type=float, default=0.3,
                    help="seconds of timed runs per measurement, at least (sub-millisecond "
                         "cases otherwise measure a few milliseconds of a drifting machine)")
    ap.add_argument("--quick", action="store_true", help="a few cases only (a smoke test)")
    ap.add_argument("--parts", default="numpy,batched,functional")
    args = ap.parse_args()
    bench = Bench(args)
    print("machine: %d cores; OPENBLAS_NUM_THREADS=1 for einsumdb and numpy %s\n"
          % (os.cpu_count(), np.__version__))
    ok = True
    parts = args.parts.split(",")
    if "numpy" in parts:
        ok = part_numpy(bench, args.quick) and ok
    if "batched" in parts:
        part_batched(bench, args.quick)
    if "functional" in parts:
        part_functional(bench, args.quick)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
