#!/usr/bin/python3
"""Makes docs/performance/db.md from the JSON files scripts/bench_db_runs.py wrote: every figure of
`einsumdb bench db` as min / median / max over the runs, per store (SQLite, PostgreSQL), for the
build measured (label "after") and, where present, an earlier build (label "before") beside it.

Usage: perf_page_db.py [--data docs/performance/data] [-o docs/performance/db.md]
"""
import argparse
import json
import pathlib
import statistics

FIGURES = [
    ("best_median_us", "best(): spec → answer, median (µs)", "%.1f"),
    ("best_p90_us", "best(): 90th percentile (µs)", "%.1f"),
    ("canonicalize_median_us", "canonicalization alone, median (µs)", "%.1f"),
    ("best_over_canonicalize", "best() / canonicalization, medians of the same run", "%.2f"),
    ("lookup_median_us", "lookup of a canonical form, median (µs)", "%.1f"),
    ("lookup_p90_us", "lookup, 90th percentile (µs)", "%.1f"),
    ("nearest_median_us", "nearest size, spec → answer, median (µs)", "%.1f"),
    ("nearest_p90_us", "nearest size, 90th percentile (µs)", "%.1f"),
    ("symbolic_median_us", "symbolic workload, spec → answer, median (µs)", "%.1f"),
    ("symbolic_p90_us", "symbolic workload, 90th percentile (µs)", "%.1f"),
    ("best_many_per_second", "best_many, canonical forms given (answers/s)", "%.0f"),
    ("best_many_from_specs_per_second", "best_many from specs (answers/s)", "%.0f"),
    ("record_per_second_batched", "recording, 10,000 per transaction (measurements/s)", "%.0f"),
    ("record_per_second_one_per_transaction", "recording, one per transaction (measurements/s)",
     "%.0f"),
]


def spread(values, fmt):
    if not values:
        return "—"
    v = sorted(values)
    return " / ".join(fmt % x for x in (v[0], statistics.median(v), v[-1]))


def load(data, label, store):
    runs = []
    for path in sorted(data.glob(f"db-{label}-{store}-*.json")):
        runs.append(json.loads(path.read_text()))
    return runs


def section(store, title, after, before, before_name):
    if not after:
        return []
    lines = [f"## {title}", "", f"Command: `{after[0]['command']}`, {len(after)} runs"
             + (f", and {len(before)} of {before_name} in the same session" if before else "") + ".", ""]
    head = "| figure | this build (min / median / max) |"
    if before:
        head += f" {before_name} (min / median / max) | gain of this build (median; above 1: better) |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for key, name, fmt in FIGURES:
        a = [r["result"][key] for r in after if key in r["result"]]
        if not a:
            continue
        cells = [name, spread(a, fmt)]
        if before:
            b = [r["result"][key] for r in before if key in r["result"]]
            cells.append(spread(b, fmt) if b else "not measured")
            # Above 1: this build is better (faster, or more per second).
            gain = None
            if b:
                ma, mb = statistics.median(a), statistics.median(b)
                gain = ma / mb if "per_second" in key else mb / ma
            cells.append("%.2f" % gain if gain else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="docs/performance/data")
    p.add_argument("-o", "--output", default="docs/performance/db.md")
    p.add_argument("--before-name", default="the earlier build",
                   help="what the files labelled before measured (a commit, say)")
    args = p.parse_args()
    data = pathlib.Path(args.data)
    sqlite_after, sqlite_before = load(data, "after", "sqlite"), load(data, "before", "sqlite")
    pg_after, pg_before = load(data, "after", "postgres"), load(data, "before", "postgres")
    if not sqlite_after and not pg_after:
        raise SystemExit(f"perf_page_db.py: no db-after-*.json in {data}")
    first = (sqlite_after or pg_after)[0]
    lines = [
        "# Retrieval and recording in the store",
        "",
        "Made by `scripts/perf_page_db.py` from the files `scripts/bench_db_runs.py` wrote "
        f"(`{data}/db-*.json`). Machine: {first['machine']}, {first['cores']} cores. Each figure "
        "is min / median / max over the runs; each run fills a fresh store with the benchmark's "
        "100,000 workloads and 1,000,000 measurements, then asks.",
        "",
        "- *best()* is what an application asks: its spec canonicalized, looked up, the answer "
        "translated into its names. *lookup* starts from the canonical form. Each query is a "
        "workload of its own, drawn at random, so none finds the pages of the one before.",
        "- *nearest size*: sizes never measured, answered by the nearest measured size of their "
        "structure (25,000 workloads share each structure in this store).",
        "- *symbolic workload*: concrete sizes answered by a symbolic workload's facts (30 "
        "symbolic workloads of one structure).",
        "- *best_many*: a batch of shapes answered in one read transaction.",
        "- The machine is a shared virtual machine whose speed varies from minute to minute "
        "(canonicalization alone, the same code in every run, spans the range in its row): "
        "*best() / canonicalization*, two medians taken in the same run, query by query "
        "interleaved, is the figure that compares builds best.",
        f"- The earlier build, {args.before_name}, ran the same benchmark in the same session "
        "(on SQLite alternating with this one); it had no figures for the lookup alone, the nearest size, "
        "symbolic workloads or best_many.",
        "",
    ]
    lines += section("sqlite", "SQLite (the default store)", sqlite_after, sqlite_before,
                     args.before_name)
    lines += section("postgres", "PostgreSQL on 127.0.0.1", pg_after, pg_before, args.before_name)
    pathlib.Path(args.output).write_text("\n".join(lines))
    print(args.output)


if __name__ == "__main__":
    main()
