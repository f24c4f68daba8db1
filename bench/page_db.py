#!/usr/bin/python3
"""Makes docs/performance/db.md from the JSON files bench/db_runs.py wrote: every figure of
`einsumdb bench db` as min / median / max over the runs, per store (SQLite, PostgreSQL), for the
build measured (label "after") and, where present, an earlier build (label "before") beside it.

Usage: page_db.py [--data docs/performance/data] [-o docs/performance/db.md]
"""
import argparse
import json
import pathlib
import re
import statistics

def ratio(numerator, denominator):
    return lambda r: r[numerator] / r[denominator] if numerator in r and denominator in r else None


def filling(key):
    # The figure as the process that filled the store timed it, right after recording.
    return lambda r: r.get("filling", {}).get(key)


def per_answer_over_canonicalize(rate):
    # A batch's time per answer over canonicalization's median of the same run.
    return lambda r: (1e6 / r[rate]) / r["canonicalize_median_us"] if rate in r else None


# (figure, row title, format): a figure is a key of the benchmark's JSON or a function of it.
FIGURES = [
    ("best_median_us", "best(): spec → answer, median (µs)", "%.1f"),
    ("best_p90_us", "best(): 90th percentile (µs)", "%.1f"),
    ("canonicalize_median_us", "canonicalization alone (both labelings), median (µs)", "%.1f"),
    ("key_median_us", "canonical key alone (the one labeling best() makes first), median (µs)",
     "%.1f"),
    ("best_over_canonicalize", "best() / canonicalization, medians of the same run", "%.2f"),
    ("statement_median_us", "one statement reading one value (the floor under an answer), "
     "median (µs)", "%.1f"),
    ("lookup_median_us", "lookup of a canonical form, median (µs)", "%.1f"),
    ("lookup_p90_us", "lookup, 90th percentile (µs)", "%.1f"),
    (ratio("lookup_median_us", "statement_median_us"),
     "lookup / one statement, medians of the same run", "%.2f"),
    (ratio("lookup_median_us", "canonicalize_median_us"),
     "lookup / canonicalization, medians of the same run", "%.2f"),
    ("nearest_median_us", "nearest size, spec → answer, median (µs)", "%.1f"),
    ("nearest_p90_us", "nearest size, 90th percentile (µs)", "%.1f"),
    (ratio("nearest_median_us", "best_median_us"), "nearest size / best(), medians of the same run",
     "%.2f"),
    (ratio("nearest_median_us", "canonicalize_median_us"),
     "nearest size / canonicalization, medians of the same run", "%.2f"),
    ("symbolic_median_us", "symbolic workload, spec → answer, median (µs)", "%.1f"),
    ("symbolic_p90_us", "symbolic workload, 90th percentile (µs)", "%.1f"),
    (ratio("symbolic_median_us", "best_median_us"),
     "symbolic workload / best(), medians of the same run", "%.2f"),
    (ratio("symbolic_median_us", "canonicalize_median_us"),
     "symbolic workload / canonicalization, medians of the same run", "%.2f"),
    (filling("best_median_us"), "filling process: best(), median (µs)", "%.1f"),
    (filling("best_p90_us"), "filling process: best(), 90th percentile (µs)", "%.1f"),
    (filling("canonicalize_median_us"), "filling process: canonicalization alone, median (µs)",
     "%.1f"),
    (filling("nearest_median_us"), "filling process: nearest size, median (µs)", "%.1f"),
    (filling("nearest_p90_us"), "filling process: nearest size, 90th percentile (µs)", "%.1f"),
    (filling("symbolic_median_us"), "filling process: symbolic workload, median (µs)", "%.1f"),
    (filling("symbolic_p90_us"), "filling process: symbolic workload, 90th percentile (µs)",
     "%.1f"),
    ("best_many_per_second", "best_many, canonical forms given (answers/s)", "%.0f"),
    ("best_many_from_specs_per_second", "best_many from specs (answers/s)", "%.0f"),
    (per_answer_over_canonicalize("best_many_per_second"),
     "best_many, time per answer / canonicalization of the same run", "%.2f"),
    ("record_per_second_batched", "recording, 10,000 per transaction (measurements/s)", "%.0f"),
    ("record_per_second_one_per_transaction", "recording, one per transaction (measurements/s)",
     "%.0f"),
]


def value(result, figure):
    return figure(result) if callable(figure) else result.get(figure)


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


def shown(command):
    # A run's temporary store as STORE, the build's path as `einsumdb`.
    command = re.sub(r"\S*/einsumdb-bench-db-\S*/store\.sqlite", "STORE", command)
    return re.sub(r"(^|; )\S*einsumdb[^ ]*", r"\1einsumdb", command)


def section(store, title, after, before, before_name):
    if not after:
        return []
    lines = [f"## {title}", "", f"Command: `{shown(after[0]['command'])}`, {len(after)} runs"
             + (f", and {len(before)} of {before_name} in the same session" if before else "") + ".", ""]
    head = "| figure | this build (min / median / max) |"
    if before:
        head += f" {before_name} (min / median / max) | gain of this build (median; above 1: better) |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for figure, name, fmt, *only in FIGURES:
        if only and store not in only[0]:
            continue
        a = [v for v in (value(r["result"], figure) for r in after) if v is not None]
        if not a:
            continue
        cells = [name, spread(a, fmt)]
        if before:
            b = [v for v in (value(r["result"], figure) for r in before) if v is not None]
            cells.append(spread(b, fmt) if b else "not measured")
            # Above 1: this build is better (faster, or more per second).
            gain = None
            if b:
                ma, mb = statistics.median(a), statistics.median(b)
                gain = ma / mb if name.endswith("/s)") else mb / ma  # a rate, or a time
            cells.append("%.2f" % gain if gain else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="docs/performance/data")
    p.add_argument("-o", "--output", default="docs/performance/db.md")
    p.add_argument("--before-name", default="the earlier build",
                   help="what the files labelled before measured (a commit, say)")
    p.add_argument("--remark", action="append", default=[],
                   help="a remark on these runs, listed with the page's notes")
    args = p.parse_args()
    data = pathlib.Path(args.data)
    sqlite_after, sqlite_before = load(data, "after", "sqlite"), load(data, "before", "sqlite")
    pg_after, pg_before = load(data, "after", "postgres"), load(data, "before", "postgres")
    if not sqlite_after and not pg_after:
        raise SystemExit(f"page_db.py: no db-after-*.json in {data}")
    first = (sqlite_after or pg_after)[0]
    lines = [
        "# Retrieval and recording in the store",
        "",
        "Made by `bench/page_db.py` from the files `bench/db_runs.py` wrote "
        f"(`{data}/db-*.json`). Machine: {first['machine']}, {first['cores']} cores. Each figure "
        "is min / median / max over the runs; each run fills a fresh store with the benchmark's "
        "100,000 workloads and 1,000,000 measurements, then asks. The recording figures come "
        "from the process that fills the store; the answers from a second process that opens "
        "the store the first left (`bench db --reuse`), as an application opens a store a tuner "
        "filled. The rows marked *filling process* are the same answers timed by the process "
        "that filled the store, right after its million records (`bench db` alone).",
        "",
        "- *best()* is what an application asks: its spec canonicalized, looked up, the answer "
        "translated into its names. *lookup* starts from the canonical form. Each query is a "
        "workload of its own, drawn at random, so none finds the pages of the one before. "
        "best() labels a query once (its canonical key); the structure labeling, which only an "
        "unknown workload needs, is added when the exact lookup misses.",
        "- *One statement reading one value* (the store's schema version, a statement prepared "
        "once and kept) is the floor under any answer: on SQLite the locks a read takes (three "
        "system calls), on a server one round trip.",
        "- *nearest size*: sizes never measured, answered by the nearest measured size of their "
        "structure (25,000 workloads share each structure in this store).",
        "- *symbolic workload*: concrete sizes answered by a symbolic workload's facts (30 "
        "symbolic workloads of one structure).",
        "- *best_many*: a batch of shapes answered in one read transaction.",
        *(f"- {remark}" for remark in args.remark),
        "- The machine is a shared virtual machine whose speed varies from minute to minute, "
        "by up to 1.8 times between runs (canonicalization alone spans that range in its row): "
        "a build's absolute medians depend on which runs met a slow minute. The ratios to "
        "canonicalization's median of the same run, query by query interleaved, compare builds "
        "and machines best (this build's canonicalization is its own, the same work or less, so "
        "the ratios do not flatter it).",
        f"- The earlier build, {args.before_name}, ran the same benchmark in the same session, "
        "round by round in turn with this one (`bench/db_runs.py --also`).",
        "",
    ]
    lines += section("sqlite", "SQLite (the default store)", sqlite_after, sqlite_before,
                     args.before_name)
    lines += section("postgres", "PostgreSQL on 127.0.0.1", pg_after, pg_before, args.before_name)
    pathlib.Path(args.output).write_text("\n".join(lines))
    print(args.output)


if __name__ == "__main__":
    main()
