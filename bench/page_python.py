#!/usr/bin/python3
"""Makes docs/performance/python.md from the JSON files bench/python.py wrote (--json):
every figure as min / median / max over the runs given, the ratio numpy / einsumdb measured in
the same run, and, where files of an earlier build are given too (--before), the same figures for
it beside.

Usage: page_python.py --after A1.json A2.json A3.json [--before B1.json ...] [--machine TEXT]
                           [-o docs/performance/python.md]
"""
import argparse
import json
import pathlib
import statistics


def spread(values, fmt):
    values = sorted(values)
    if not values:
        return "—"
    return " / ".join(fmt % v for v in (values[0], statistics.median(values), values[-1]))


def rows(runs, section, key, fields):
    """{row name: {field: [value per run]}} for one section of the results."""
    out = {}
    for run in runs:
        for row in run.get(section, []):
            if "refused" in row:
                out.setdefault(str(row[key]), {})["refused"] = row["refused"]
                continue
            entry = out.setdefault(str(row[key]), {})
            for f in fields:
                entry.setdefault(f, []).append(row[f])
    return out


def table(title, section, key, runs_after, runs_before, unit, scale, explain):
    lines = [f"### {title}", "", explain, ""]
    after = rows(runs_after, section, key, ["einsumdb_s", "numpy_s"])
    before = rows(runs_before, section, key, ["einsumdb_s", "numpy_s"])
    head = f"| {key} | einsumdb ({unit}) | numpy ({unit}) | numpy / einsumdb |"
    if runs_before:
        head += f" before: einsumdb ({unit}) | before: numpy / einsumdb |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for name, a in after.items():
        if "refused" in a:
            cells = [name, "refused", "", ""]
        else:
            ratio = [n / e for n, e in zip(a["numpy_s"], a["einsumdb_s"])]
            cells = [name, spread([x * scale for x in a["einsumdb_s"]], "%.2f"),
                     spread([x * scale for x in a["numpy_s"]], "%.2f"), spread(ratio, "%.2f")]
        if runs_before:
            b = before.get(name)
            if not b or "refused" in b:
                cells += ["refused" if b else "—", "—"]
            else:
                ratio = [n / e for n, e in zip(b["numpy_s"], b["einsumdb_s"])]
                cells += [spread([x * scale for x in b["einsumdb_s"]], "%.2f"),
                          spread(ratio, "%.2f")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--after", nargs="+", required=True)
    p.add_argument("--before", nargs="*", default=[])
    p.add_argument("--machine", default="")
    p.add_argument("--before-label", default="the previous build",
                   help="what the --before files measured, e.g. a commit")
    p.add_argument("-o", "--output", default="docs/performance/python.md")
    a = p.parse_args()
    after = [json.loads(pathlib.Path(f).read_text()) for f in a.after]
    before = [json.loads(pathlib.Path(f).read_text()) for f in a.before]
    lines = ["# Python: einsumdb.einsum against numpy.einsum", "",
             "Made by `bench/page_python.py` from the JSON that `bench/python.py "
             "--json` wrote; do not edit by hand. Each figure is min / median / max over "
             f"{len(after)} runs of the benchmark; every ratio compares two times measured in "
             "the same run, one BLAS thread on both sides.", ""]
    if a.machine:
        lines += [f"Machine: {a.machine}", ""]
    lines += ["Command: `" + after[0].get("command", "bench/python.py") + "`", ""]
    if before:
        lines += ["The *before* columns are the same benchmark, in runs alternating with these, "
                  f"importing the module of {a.before_label} (`--module`): `"
                  + before[0].get("command", "") + "`.", ""]
    lines += table("1. A repeated small matrix product", "overhead", "n", after, before, "µs", 1e6,
                   "The per-call time of `einsumdb.einsum('ik,kj->ij', A, B)` on n×n operands "
                   "against `numpy.einsum`: what a call costs beyond its arithmetic.")
    lines += table("2. Tuned contractions", "speed", "workload", after, before, "ms", 1e3,
                   "Each workload tuned into a fresh store first, then einsumdb against "
                   "`numpy.einsum(optimize=True)` as it returns (often a strided view); "
                   "einsumdb's result is C-contiguous.")
    lines += table("3. Calls beyond one float dtype", "contract", "call", after, before, "µs",
                   1e6, "numpy's contract: complex, mixed dtypes, broadcasting ellipses and "
                   "sublists, per call. *refused*: the build did not take the call.")
    lines += table("4. As opt_einsum's backend", "opt_einsum", "contraction", after, before, "ms",
                   1e3, "`opt_einsum.contract(..., backend='einsumdb')` against "
                   "`backend='numpy'`: opt_einsum's path, each pairwise step by the backend.")
    pathlib.Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.output).write_text("\n".join(lines))


if __name__ == "__main__":
    main()
