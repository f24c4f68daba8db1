#!/usr/bin/python3
"""Does the tuner measure what a run measures? TCCG cases tuned --tunes times each, every tune on a
fresh store, with the options of a careful user (`einsumdb tune SPEC --threads 1 --warmup 2
--min-reps 5 --min-time 0.3`); after each tune, in fresh processes and alternating:

  - the tuned run: `einsumdb run SPEC --db STORE --repeat R` (the store's winner);
  - the untuned default: `einsumdb run SPEC --db EMPTY --repeat R` (what a user gets without
    tuning: tensor_gemm's default parameters).

Per tune it prints the winner, its median inside the tune, the tuned run's median, and the
default's; then, per case, min / median / max over the tunes of

  - in-tune / standalone: the winner's median inside the tune against its median in a process of
    its own (1 when the tuner measures what a run measures);
  - tuned / default: the tuned run's median against the untuned default's (at most 1, within the
    machine's spread, when the store's answer is worth having);

and the spread of the default's own runs (max / min of its medians over the tunes) as the
machine's noise. The tune's own standalone check (its `standalone` field: the winner and the
default in processes of their own) is kept in --out with every candidate's samples.

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed (see tccg.py); one BLAS thread.
Results go to --out as JSON (one object per tune) when given.

Usage: tune_fidelity.py EINSUMDB [--cases 1-8,13,33,37,43] [--tunes 5] [--repeat 3]
                              [--out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from db_runs import cpu_model  # noqa: E402
from tccg import cases, einsumdb, selection, spec_args  # noqa: E402


def transform_text(t):
    params = {k: v for k, v in t["params"].items() if k != "threads"}
    return t["strategy"] + (" " + json.dumps(params, separators=(",", ":")) if params else "")


def build_id(exe):
    """The commit of the repository the executable was built in, when it is one's."""
    p = subprocess.run(["git", "-C", os.path.dirname(exe), "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else "unknown"


def spread(v, fmt="{:.2f}"):
    return " / ".join(fmt.format(x) for x in (min(v), statistics.median(v), max(v)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("einsumdb")
    ap.add_argument("--cases", default="1-8,13,33,37,43")
    ap.add_argument("--tunes", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        os.environ.pop(k, None)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    exe = os.path.abspath(a.einsumdb)
    rows = []
    summary = []
    print("| case | tune | winner | in tune s | tuned run s | default run s | in tune / run | "
          "tuned / default |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases(selection(a.cases)):
        spec = spec_args(c)
        per = []
        for t in range(1, a.tunes + 1):
            with tempfile.TemporaryDirectory() as d:
                store, empty = os.path.join(d, "tune.db"), os.path.join(d, "empty.db")
                t0 = time.perf_counter()
                j = einsumdb(exe, ["tune"] + spec + [
                    "--threads", "1", "--warmup", "2", "--min-reps", "5", "--min-time", "0.3",
                    "--db", store, "--json", "--no-progress"])
                tune_wall = time.perf_counter() - t0
                ok = [r for r in j["results"] if r["status"] == "ok"]
                win = min(ok, key=lambda r: r["median_s"])
                tuned, default = [], []
                for _ in range(2):  # alternating, in fresh processes
                    tuned.append(einsumdb(exe, ["run"] + spec + [
                        "--db", store, "--repeat", str(a.repeat), "--json"])["median_s"])
                    default.append(einsumdb(exe, ["run"] + spec + [
                        "--db", empty, "--repeat", str(a.repeat), "--json"])["median_s"])
            row = {"case": c["case"], "tune": t,
                   "winner": transform_text({"strategy": win["strategy"],
                                             "params": win["params"]}),
                   "in_tune_s": win["median_s"], "tuned_run_s": min(tuned),
                   "default_run_s": min(default),
                   "tune_wall_s": tune_wall,
                   "candidates": [{"transform": transform_text(r), "median_s": r["median_s"],
                                   "search_median_s": r.get("search_median_s"),
                                   "seconds": r.get("seconds")} for r in ok],
                   "standalone": j.get("standalone")}
            rows.append(row)
            per.append(row)
            print(f"| {c['case']} | {t} | {row['winner']} | {row['in_tune_s']:.3f} | "
                  f"{row['tuned_run_s']:.3f} | {row['default_run_s']:.3f} | "
                  f"{row['in_tune_s'] / row['tuned_run_s']:.2f} | "
                  f"{row['tuned_run_s'] / row['default_run_s']:.2f} |", flush=True)
        fidelity = [r["in_tune_s"] / r["tuned_run_s"] for r in per]
        gain = [r["tuned_run_s"] / r["default_run_s"] for r in per]
        defaults = [r["default_run_s"] for r in per]
        summary.append({"case": c["case"], "in_tune_over_run": fidelity,
                        "tuned_over_default": gain,
                        "default_spread": max(defaults) / min(defaults)})
    print("\n| case | in tune / run (min / median / max) | tuned / default | "
          "default's own spread (max / min) |")
    print("|---|---|---|---|")
    for s in summary:
        print(f"| {s['case']} | {spread(s['in_tune_over_run'])} | "
              f"{spread(s['tuned_over_default'])} | {s['default_spread']:.2f} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"command": " ".join(["bench/tune_fidelity.py"] + sys.argv[1:]),
                       "cpu": cpu_model(), "cores": os.cpu_count(),
                       "date": time.strftime("%Y-%m-%d"), "build": build_id(exe),
                       "rows": rows, "summary": summary},
                      f, indent=1)


if __name__ == "__main__":
    main()
