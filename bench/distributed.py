"""The chain (A×B)+(C×(D×E)) on P ranks: einsumdb against the same calls made directly in one
process, against the ideal, and against ScaLAPACK, every figure from this run.

Per round, for each shape:
  - direct: bench/chain_direct — cblas_dgemm three times and one addition in one process, every
    array allocated beforehand — and this machine's memory-copy bandwidth;
  - for each P: einsumdb with the EinDecomp plan (in the default mode, then with --overlap and
    with --no-overlap), the sqrt and data plans, and the plan made by `einsumdb plan --cost
    measured` after those runs recorded their partitionings; ScaLAPACK (pdgemm/pdgeadd, best of
    three block sizes).
The ideal at P ranks is the one-process time divided by min(P, cores) plus the bytes the
EinDecomp plan moved at the measured copy bandwidth. Ranks beyond the machine's cores are
oversubscribed, and the table says so. Times are the slowest rank's, median over --repeat runs,
inputs in place beforehand on every side. With --rounds N every ratio is given as min / median /
max over the rounds, and each verdict is taken on the median.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OPENBLAS_NUM_THREADS="1", OMPI_MCA_btl="self,vader")
# OpenBLAS picks the kernel for this CPU, for einsumdb and ScaLAPACK alike: a machine may pin an
# older one.
for _pin in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    ENV.pop(_pin, None)


def mpirun(np_, argv, timeout=1800):
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np",
           str(np_)] + argv
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout


def chain(shape, s):
    t, w = (s, s) if shape == "square" else (s // 10, 10 * s)
    dims = {"A": [s, t], "B": [t, s], "C": [s, t], "D": [t, w], "E": [w, s]}
    return {"inputs": {k: {"shape": v} for k, v in dims.items()},
            "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
                      {"name": "DE", "einsum": "ij,jk->ik", "inputs": ["D", "E"]},
                      {"name": "CDE", "einsum": "ij,jk->ik", "inputs": ["C", "DE"]},
                      {"name": "Z", "einsum": "ij,ij->ij", "inputs": ["AB", "CDE"],
                       "join": "add"}]}


def spread(values, fmt="{:.2f}"):
    """min / median / max, or the one value."""
    if len(values) == 1:
        return fmt.format(values[0])
    return " / ".join(fmt.format(v) for v in
                      (min(values), statistics.median(values), max(values)))


class Bench:
    def __init__(self, a):
        self.einsumdb = os.path.join(a.bindir, "einsumdb")
        self.scalapack = os.path.join(a.bindir, "scalapack_chain")
        self.direct = os.path.join(a.bindir, "chain_direct")
        self.repeat = a.repeat or (3 if a.quick else 5)
        self.work = tempfile.mkdtemp(prefix="einsumdb_bench_dist_")
        self.db = os.path.join(self.work, "bench.sqlite")

    def plan(self, graph, p, name, extra):
        path = os.path.join(self.work, f"{os.path.basename(graph)}_{p}_{name}.plan.json")
        cmd = [self.einsumdb, "plan", graph, "--procs", str(p), "--output", path, "--json",
               "--db", self.db] + extra
        r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        if r.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
        return path, json.loads(r.stdout)

    def run(self, graph, plan, p, extra=()):
        argv = [self.einsumdb, "run", graph, "--plan", plan, "--repeat", str(self.repeat),
                "--json", "--db", self.db] + list(extra)
        return json.loads(mpirun(p, argv))

    def round(self, shape, s, procs, cores):
        """One round for one shape: {p: {"times": {...}, "sent": bytes, ...}}, and the direct run."""
        graph = os.path.join(self.work, f"{shape}.json")
        with open(graph, "w") as f:
            json.dump(chain(shape, s), f)
        r = subprocess.run([self.direct, "--shape", shape, "--s", str(s), "--repeat",
                            str(self.repeat)], capture_output=True, text=True, env=ENV, check=True)
        direct = json.loads(r.stdout)
        out = {}
        for p in procs:
            times, info = {}, {}
            for method in ["eindecomp", "sqrt", "data"]:
                plan, _ = self.plan(graph, p, method,
                                    [] if method == "eindecomp" else ["--baseline", method])
                j = self.run(graph, plan, p)
                times[method] = j["median_s"]
                if method == "eindecomp":
                    info["sent"] = j["sent_bytes"]
                    info["default overlaps"] = j["overlap"]
                    times["overlap"] = self.run(graph, plan, p, ["--overlap"])["median_s"]
                    times["no overlap"] = self.run(graph, plan, p, ["--no-overlap"])["median_s"]
            # Every plan above recorded its measured partitionings: plan again on them.
            plan, _ = self.plan(graph, p, "measured", ["--cost", "measured"])
            times["measured"] = self.run(graph, plan, p)["median_s"]
            best = None
            for nb in [64, 128, 256]:
                j = json.loads(mpirun(p, [self.scalapack, "--shape", shape, "--s", str(s), "--nb",
                                          str(nb), "--repeat", str(self.repeat)]))
                if not j["checksum_finite"]:
                    sys.exit("ScaLAPACK produced a non-finite result")
                if best is None or j["median_s"] < best["median_s"]:
                    best = j
            times["scalapack"] = best["median_s"]
            info["nb"] = best["nb"]
            info["ideal"] = (direct["median_s"] / min(p, cores) +
                             info["sent"] / direct["copy_bytes_per_s"])
            info["times"] = times
            out[p] = info
            e = times["eindecomp"]
            print(f"  {shape} s={s} np={p}: einsumdb {e:.3f} s, direct {direct['median_s']:.3f} s,"
                  f" ideal {info['ideal']:.3f} s, ScaLAPACK {times['scalapack']:.3f} s "
                  f"(nb={best['nb']}), measured re-plan {times['measured']:.3f} s", file=sys.stderr)
        return out, direct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("--quick", action="store_true", help="smaller matrices, fewer repetitions")
    ap.add_argument("--repeat", type=int, default=0, help="runs per configuration (median)")
    ap.add_argument("--rounds", type=int, default=3, help="the whole table this many times")
    ap.add_argument("--procs", default="1,2,4")
    a = ap.parse_args()
    bench = Bench(a)
    sizes = {"square": 768 if a.quick else 1536, "skewed": 1000 if a.quick else 2000}
    cores = os.cpu_count()
    procs = [int(p) for p in a.procs.split(",")]
    # ratios[(shape, p)][name] = [per round]
    ratios, last = {}, {}
    bandwidth = []
    for k in range(a.rounds):
        print(f"round {k + 1} of {a.rounds}", file=sys.stderr)
        for shape, s in sizes.items():
            out, direct = bench.round(shape, s, procs, cores)
            bandwidth.append(direct["copy_bytes_per_s"])
            for p, info in out.items():
                t, e = info["times"], info["times"]["eindecomp"]
                best_plan = min(t["eindecomp"], t["sqrt"], t["data"])
                r = ratios.setdefault((shape, p), {})
                for name, v in [("direct", e / direct["median_s"]),
                                ("ideal", e / info["ideal"]),
                                ("scalapack", t["scalapack"] / e),
                                ("overlap", t["overlap"] / e),
                                ("no overlap", t["no overlap"] / e),
                                ("sqrt", t["sqrt"] / e), ("data", t["data"] / e),
                                ("measured", t["measured"] / best_plan),
                                ("seconds", e)]:
                    r.setdefault(name, []).append(v)
                last[(shape, p)] = (s, info)

    print(f"\n{a.rounds} round(s); memory-copy bandwidth {spread([b / 1e9 for b in bandwidth])}"
          f" GB/s; {cores} cores. Ratios are min / median / max over the rounds.\n")
    print("| shape | np | oversubscribed | einsumdb (EinDecomp) | / direct 1 process | / ideal | "
          "ScaLAPACK / einsumdb | default mode | --overlap / default | --no-overlap / default | "
          "sqrt / EinDecomp | data / EinDecomp | measured re-plan / best plan |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (shape, p), r in ratios.items():
        s, info = last[(shape, p)]
        print(f"| {shape} {s} | {p} | {'yes' if p > cores else 'no'} | "
              f"{spread(r['seconds'], '{:.3f}')} s | {spread(r['direct'])} | "
              f"{spread(r['ideal'])} | {spread(r['scalapack'])} | "
              f"{'overlap' if info['default overlaps'] else 'no overlap'} | "
              f"{spread(r['overlap'])} | {spread(r['no overlap'])} | "
              f"{spread(r['sqrt'])} | {spread(r['data'])} | {spread(r['measured'])} |")
    print("\n'--overlap / default' and '--no-overlap / default' at or above 1: the default mode "
          "(overlap unless ranks share cores) is the faster one. "
          "'ScaLAPACK / einsumdb' above 1: einsumdb is faster. 'measured re-plan / best plan': the "
          "plan of `einsumdb plan --cost measured` against the fastest of the EinDecomp, sqrt and "
          "data plans measured just before it.\n")

    ok = True

    def verdict(cond, text):
        nonlocal ok
        ok = ok and cond
        print(f"{'ok     ' if cond else 'NOT MET'}  {text}")

    for (shape, p), r in ratios.items():
        med = {k: statistics.median(v) for k, v in r.items()}
        if p == 1:
            verdict(med["direct"] <= 1.05,
                    f"{shape}, np=1: einsumdb / direct calls = {med['direct']:.3f} (at most 1.05)")
            continue
        verdict(med["scalapack"] > 1,
                f"{shape}, np={p}: ScaLAPACK / einsumdb = {med['scalapack']:.2f} (above 1)")
        verdict(med["ideal"] <= 1.2,
                f"{shape}, np={p}: einsumdb / ideal = {med['ideal']:.2f} (at most 1.2)")
        verdict(min(med["overlap"], med["no overlap"]) >= 0.98,
                f"{shape}, np={p}: --overlap / default = {med['overlap']:.2f}, --no-overlap / "
                f"default = {med['no overlap']:.2f} (the default mode is the faster, within 2%)")
        verdict(med["measured"] <= 1.05,
                f"{shape}, np={p}: measured re-plan / best plan = {med['measured']:.2f} "
                "(at most 1.05)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
