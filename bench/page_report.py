#!/usr/bin/env python3
"""docs/performance/report.md from the JSON files of bench/report.sh (OUT=FILE), one per
run: the page's size, the time to write it and Chromium's time to load it, as min / median / max
over the runs' repetitions.

Usage: bench/page_report.py OUT.md RUN.json [RUN.json ...]"""
import json
import statistics
import sys


def spread(values, digits=2):
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def main(out, paths):
    runs = [json.load(open(p)) for p in paths]
    first = runs[0]
    report = [t for r in runs for t in r["report_s"]]
    stats = [t for r in runs for t in r["stats_s"]]
    ratio = [a / b for r in runs for a, b in zip(r["report_s"], r["stats_s"])]
    rss = [k / 1024 for r in runs for k in r["report_peak_rss_kib"]]
    lines = [
        "# einsumdb report on a large store",
        "",
        "Made by `bench/page_report.py` from the files of `OUT=FILE "
        f"{first['command']}` ({len(runs)} run(s), three repetitions each): "
        f"{first['cpu']}, {first['cores']} cores. Figures are min / median / max over all "
        "repetitions.",
        "",
        f"The store: {first['measurements']:,} measurements of {first['workloads']:,} workloads "
        f"({first['store_bytes'] / 2**20:.0f} MiB), filled by `einsumdb bench db`.",
        "",
        "| | figure |",
        "|---|---|",
        f"| page size | {spread([r['page_bytes'] / 1e6 for r in runs])} MB |",
        f"| roofline points drawn (of the store's) | {first['page']['points_drawn']:,} of "
        f"{first['page']['points']:,} |",
        f"| index rows | {first['page']['index_rows']:,} |",
        f"| `einsumdb report` wall time | {spread(report)} s |",
        f"| `einsumdb stats` on the same store (reads every table once) | {spread(stats)} s |",
        f"| report / stats | {spread(ratio)} |",
        f"| peak RSS of `einsumdb report` | {spread(rss, 0)} MiB |",
    ]
    page = [t for r in runs if r["chromium_page_s"] for t in r["chromium_page_s"]]
    empty = [t for r in runs if r["chromium_empty_s"] for t in r["chromium_empty_s"]]
    if page:
        extra = [a - b for r in runs if r["chromium_page_s"]
                 for a, b in zip(r["chromium_page_s"], r["chromium_empty_s"])]
        lines += [
            f"| headless Chromium loads the page (`--dump-dom`, script run) | {spread(page)} s |",
            f"| the same for an empty page (the browser's start-up) | {spread(empty)} s |",
            f"| the page's own share | {spread(extra)} s |",
        ]
    lines += [
        "",
        "The page stays bounded however large the store: at most `--max-points` roofline points "
        "per device, `--max-rows` rows of the index and of the comparison, the 200 facts that "
        "got slower the most, and the candidates of 12 workloads (or those named by "
        "`--workload`); it says what it left out.",
        "",
    ]
    open(out, "w").write("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
