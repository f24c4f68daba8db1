#!/usr/bin/env python3
"""docs/performance/tune.md from the JSON files of bench/tune_fidelity.py (--out FILE):
per TCCG case, over its tunes, how far the winner's time in the tune was from the same transform
run in a process of its own, and the tuned run against the untuned default.

With --before FILE (the same script run with an earlier build), the same summary of that run
follows, for comparison.

Usage: bench/page_tune.py OUT.md RUN.json [RUN.json ...] [--before RUN.json]"""
import collections
import json
import os
import statistics
import sys


def spread(values, digits=2):
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def tccg_einsums():
    """Case number → its einsum, from the benchmark's own list."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = {}
    with open(os.path.join(here, "..", "tests", "data", "tccg.jsonl")) as f:
        for line in f:
            c = json.loads(line)
            cc, a, b = c["tccg"].split("-")
            out[c["case"]] = f"{a},{b}->{cc}"
    return out


def is_default(winner):
    """tensor_gemm with its default parameters: what `run` takes with nothing known."""
    return winner == "tensor_gemm"


def summary(rows):
    """The ratios over all tunes; where the winner was the default, its noise."""
    same = [r["tuned_run_s"] / r["default_run_s"] for r in rows if is_default(r["winner"])]
    other = [r["tuned_run_s"] / r["default_run_s"] for r in rows if not is_default(r["winner"])]
    return (f"in tune / run {spread([r['in_tune_s'] / r['tuned_run_s'] for r in rows])}, "
            f"tuned / default {spread([r['tuned_run_s'] / r['default_run_s'] for r in rows])}; "
            f"tuned / default where the winner was the default itself ({len(same)} tunes, the "
            "same command twice: the machine's noise between processes) "
            + (spread(same) if same else "none") + f", where it was another transform "
            f"({len(other)} tunes) " + (spread(other) if other else "none"))


def main(out, paths, before=None):
    runs = [json.load(open(p)) for p in paths]
    first = runs[0]
    rows = [r for run in runs for r in run["rows"]]
    einsums = tccg_einsums()
    by_case = collections.defaultdict(list)
    for r in rows:
        by_case[r["case"]].append(r)
    lines = [
        "# Does the tuner measure what a run measures?",
        "",
        f"Made by `bench/page_tune.py` from the files of `{first['command']}` "
        f"({len(runs)} file(s); build {first.get('build', 'not recorded')}, {first['date']}): "
        f"{first['cpu']}, {first['cores']} cores, one BLAS thread, "
        "OpenBLAS's own kernel choice (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset).",
        "",
        "Each TCCG case is tuned on a fresh store (`einsumdb tune SPEC --threads 1 --warmup 2 "
        "--min-reps 5 --min-time 0.3`); then, alternating, in processes of their own, "
        "`einsumdb run SPEC --repeat 3` with that store (the tuned run) and with an empty one "
        "(the untuned default, tensor_gemm's defaults), twice each, the faster kept. Figures are "
        "min / median / max over the case's tunes:",
        "",
        "- *in tune / run*: the winner's median in the tune over the tuned run's: 1 when the "
        "tuner measures what a run measures;",
        "- *tuned / default*: the tuned run over the untuned default: at most 1, within the "
        "machine's noise, when the store's answer is worth having;",
        "- *default's spread*: the untuned default's slowest over its fastest time across the "
        "tunes, the same command each time: the machine's noise at this size.",
        "",
        "| case | einsum | tunes | winners | in tune / run | tuned / default | default's spread "
        "| tune wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in sorted(by_case):
        rs = by_case[case]
        winners = collections.Counter(
            r["winner"] + " (defaults)" if is_default(r["winner"]) else
            r["winner"].split(" ")[0] + (" (tuned parameters)" if r["winner"].startswith(
                "tensor_gemm") else "") for r in rs)
        defaults = [r["default_run_s"] for r in rs]
        lines.append(
            f"| {case} | `{einsums[case]}` | {len(rs)} | "
            + ", ".join(f"{w} ×{n}" for w, n in winners.most_common()) + " | "
            f"{spread([r['in_tune_s'] / r['tuned_run_s'] for r in rs])} | "
            f"{spread([r['tuned_run_s'] / r['default_run_s'] for r in rs])} | "
            f"{max(defaults) / min(defaults):.2f} | "
            f"{spread([r['tune_wall_s'] for r in rs], 1)} |")
    worst = max(rows, key=lambda r: r["tuned_run_s"] / r["default_run_s"])
    lines += [
        "",
        f"Over all {len(rows)} tunes: {summary(rows)}. The slowest tuned run against its "
        f"default: case {worst['case']}, tune {worst['tune']}, "
        f"{worst['tuned_run_s'] / worst['default_run_s']:.2f} ({worst['winner'].split(' ')[0]} "
        f"{worst['tuned_run_s']:.3f} s against {worst['default_run_s']:.3f} s).",
        "",
    ]
    if before:
        b = json.load(open(before))
        lines += [
            f"Before (`{b['command']}` with build {b.get('build', 'not recorded')}, {b['date']}, "
            "the same machine): over its "
            f"{len(b['rows'])} tunes, {summary(b['rows'])}.",
            "",
        ]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    args = sys.argv[1:]
    before = None
    if "--before" in args:
        k = args.index("--before")
        if k + 1 >= len(args):
            sys.exit(__doc__)
        before = args[k + 1]
        del args[k:k + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    main(args[0], args[1:], before)
