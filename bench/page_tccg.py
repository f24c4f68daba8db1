#!/usr/bin/python3
"""A page of TCCG figures from the JSON of bench/tccg.py --output FILE: the command, the
machine, the limits measured in each round, and per case the time and every ratio as min / median
/ max over the rounds, then the summary on the medians. tccg.py prints the same table. A run with
--tune adds its tunes' cost: the wall time and peak RSS of each tune, and what it measured.

With --summary, a table over all the runs follows the intro: per dtype and thread count, the
geometric mean and min of the cases' roofline fractions and of numpy's view over einsumdb, the cases
below 0.8 and those where numpy's view was faster; and over the tunes, per dtype and build, the
longest tune and the largest peak RSS over the footprint, and how many cases stayed within 60 s and
3 times the footprint (a later run's cases replacing an earlier one's).

Usage: bench/page_tccg.py OUT.md RUN.json [RUN.json ...] --title TITLE [--intro TEXT] [--summary]"""
import argparse
import collections
import json
import math
import statistics


def spread(values, fmt="{:.2f}"):
    v = sorted(values)
    return " / ".join(fmt.format(x) for x in (v[0], statistics.median(v), v[-1]))


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def processor(m):
    """' (family F, model M, L2 N KiB per core)' from a run's machine, as much as it knows."""
    if "cpu_id" not in m:
        return ""
    l2 = f", L2 {m['l2_kib']} KiB per core" if m.get("l2_kib") else ", L2 not known"
    return f" ({m['cpu_id']}{l2})"


def table_lines(result):
    """The table of a run and its summary, on the medians of the rounds."""
    cases = result["cases"]
    numpy = "numpy_view" in cases[0]
    ratios = [("roofline", "/ roofline")]
    if numpy:
        ratios += [("numpy_view", "numpy view / einsumdb"),
                   ("numpy_contiguous", "numpy contiguous / einsumdb"),
                   ("plain_gemm", "plain GEMM / einsumdb")]
    labels = list(result["also"])
    several = len(result.get("transforms", [])) > 1  # each case took the fastest of these
    titles = ["case", "einsum", "GFLOP", "M × N × K", "einsumdb ms", "/ roofline", "bound"]
    if several:
        titles.insert(5, "strategy")
    # Each strategy's time over the fastest's, where the run kept them (and the strategies differ).
    each = [s for s in result.get("transforms", []) if several and "each" in cases[0]]
    titles += [title for _, title in ratios[1:]] + [f"{label} / einsumdb" for label in labels]
    titles += [f"{s} / einsumdb" for s in each]
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    med = {key: [] for key, _ in ratios}
    med_also = {label: [] for label in labels}
    for c in cases:
        for key in med:
            med[key].append(statistics.median(c[key]))
        for label in labels:
            med_also[label].append(statistics.median(c["also"][label]))
        cells = [str(c["case"]), c["einsum"], f"{c['gflop']:.2f}", f"{c['M']} × {c['N']} × {c['K']}",
                 spread([x * 1e3 for x in c["seconds"]], "{:.1f}"), spread(c["roofline"]),
                 c["bound"]]
        if several:
            cells.insert(5, ", ".join(sorted(set(c["transform"]))))
        cells += [spread(c[key]) for key, _ in ratios[1:]]
        cells += [spread(c["also"][label]) for label in labels]
        cells += [spread(c["each"][s]) for s in each]
        lines.append("| " + " | ".join(cells) + " |")
    roof = med["roofline"]
    lines += ["", f"{len(cases)} cases, on the medians. Fraction of the roofline: geometric mean "
              f"{geomean(roof):.2f}, min {min(roof):.2f}; at or above 0.8: "
              f"{sum(f >= 0.8 for f in roof)}."]
    if numpy:
        view, contig, plain = med["numpy_view"], med["numpy_contiguous"], med["plain_gemm"]
        below = [c["case"] for c, v in zip(cases, view) if v < 1]
        lines += ["", f"numpy view / einsumdb: geometric mean {geomean(view):.2f}, min "
                  f"{min(view):.2f} (below 1: numpy's view is faster); numpy contiguous / "
                  f"einsumdb: geometric mean {geomean(contig):.2f}, min {min(contig):.2f}. "
                  f"Plain GEMM of the same shape / einsumdb: geometric mean {geomean(plain):.2f}, "
                  f"min {min(plain):.2f}; at or above 0.8: {sum(f >= 0.8 for f in plain)}. "
                  f"Cases where numpy's view was faster (median): {below or 'none'}."]
    for label in labels:
        v = med_also[label]
        slower = [c["case"] for c, x in zip(cases, v) if x < 0.95]
        lines += ["", f"{label} / einsumdb (time over time; above 1, einsumdb is faster): "
                  f"geometric mean {geomean(v):.3f}, min {min(v):.2f}, max {max(v):.2f}; cases "
                  f"below 0.95: {slower or 'none'}."]
    return lines


def run_lines(result, path, heading):
    """One run's section: its command, machine, limits and table."""
    m, lim = result["machine"], result["limits"]
    builds = ", ".join(f"{label}: `{p}`" for label, p in result["also"].items())
    lines = [heading, ""] if heading else []
    lines += [
        f"From `{path}`, written by:", "",
        "    " + " ".join(result["command"]), "",
        f"einsumdb: `{result['einsumdb']}`" + (f"; beside it, {builds}" if builds else "") + ".",
        f"Machine: {m['cpu']}" + processor(m) +
        f", {m['cores']} cores; numpy's OpenBLAS: {m['openblas']}; "
        f"{result['threads']} thread(s) each side; {result['rounds']} rounds, each case the "
        f"median of {result['repeat']} runs; {result['time']}."
        + (" Every library capped at its AVX2 kernels: "
           + ", ".join(f"{k}={v}" for k, v in result["isa"].items()) + "."
           if "isa" in result else ""), "",
        "Limits per round (min / median / max): " + result.get("gemm", "DGEMM") + " peak "
        f"{spread([x['peak_gflops'] for x in lim], '{:.1f}')} GFLOP/s (OpenBLAS "
        f"{spread([x['openblas_gflops'] for x in lim], '{:.1f}')}, einsumdb "
        f"{spread([x['einsumdb_gflops'] for x in lim], '{:.1f}')}), copy bandwidth "
        f"{spread([x['copy_gbs'] for x in lim], '{:.1f}')} GB/s (numpy copying 512 MB on "
        f"{lim[0].get('copy_threads', 1)} thread(s)).", "",
        "Each ratio is min / median / max over the rounds. A case's roofline time is "
        "max(flops / peak, (inputs + output bytes) / bandwidth)."
        + ((f" Operand {result['real']} is real, of the complex dtype's precision: a real × "
            "complex multiply-add counts 4 real FLOPs, against the complex GEMM's peak (8 real "
            "FLOPs per complex multiply-add)." if result.get("real") else
            " A complex multiply-add counts 8 real FLOPs (GFLOP and the peak alike).")
           if result.get("dtype", "f64").startswith("c") else "")
        + (f" einsumdb ran each case with {', '.join(result['transforms'])} and its time is the "
           "fastest one's (the strategy column names it, over the rounds)."
           + (" A column \"S / einsumdb\" gives strategy S's time over that fastest time."
              if "each" in result["cases"][0] else "")
           if len(result.get("transforms", [])) > 1 else ""), ""]
    return lines + table_lines(result)


def describe(best):
    """A tune's winner: its strategy and parameters but the thread count."""
    if not best.get("strategy"):
        return "none"
    params = {k: v for k, v in (best.get("params") or {}).items() if k != "threads"}
    return best["strategy"] + (" " + json.dumps(params, separators=(",", ":")) if params else "")


def times(n):
    """1 -> 'once', 2 -> 'twice', n -> 'n times'."""
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def tune_lines(result, path, heading):
    """A run's tunes: per case the wall time and the peak RSS over the footprint, min / median /
    max over the rounds, what each tune measured, its standalone check and its winners."""
    tunes, m = result["tunes"], result["machine"]
    lines = [heading, ""] if heading else []
    lines += [
        f"From `{path}`, written by:", "",
        "    " + " ".join(result["command"]), "",
        f"einsumdb: `{result['einsumdb']}`. Machine: {m['cpu']}"
        + processor(m)
        + f", {m['cores']} cores; {result['time']}.", "",
        f"Each case tuned {times(result['rounds'])} with default options on a fresh store "
        "(`einsumdb tune SPEC --db FRESH --json`: one thread, a time limit of 60 s on a workload "
        "large enough to be probed), under `/usr/bin/time -v`. Wall time and peak RSS over the "
        "footprint (inputs plus output) are min / median / max over the rounds. The standalone "
        "check (the winner and the default, each in a process of its own) either ran or was "
        "skipped as not fitting in what the time limit left.", "",
        "| case | einsum | footprint MiB | tune wall s | peak RSS / footprint | measured of "
        "candidates | left out by the time limit | standalone check | winners |",
        "|---|---|---|---|---|---|---|---|---|"]
    walls, ratios = [], []
    for t in tunes:
        r = t["rounds"]
        wall = [x["wall_s"] for x in r]
        ratio = [x["rss_mib"] / t["footprint_mib"] for x in r]
        walls.append(max(wall))
        ratios.append(max(ratio))
        checks = collections.Counter(
            "none" if not x["standalone"] else "skipped" if "skipped" in x["standalone"]
            else "failed" if "error" in x["standalone"] else "ran" for x in r)
        winners = collections.Counter(describe(x["best"]) for x in r)
        lines.append(
            f"| {t['case']} | {t['einsum']} | {t['footprint_mib']:.0f} | {spread(wall, '{:.1f}')}"
            f" | {spread(ratio)} | {spread([x['measured'] for x in r], '{:.0f}')} of "
            f"{r[-1]['candidates']} | {spread([x['not_measured'] for x in r], '{:.0f}')} | "
            + ", ".join(f"{k} ×{n}" for k, n in checks.items()) + " | "
            + ", ".join(f"`{k}` ×{n}" for k, n in winners.items()) + " |")
    lines += ["", f"{len(tunes)} case{'s' if len(tunes) > 1 else ''}. Slowest round of each: "
              "at most 60 s in "
              f"{sum(w <= 60 for w in walls)}, longest {max(walls):.1f} s. Largest peak RSS over "
              f"the footprint: at most 3 in {sum(x <= 3 for x in ratios)}, largest "
              f"{max(ratios):.2f}."]
    return lines


def case_list(cases):
    """1, 2, 3, 5, 'bmm' -> '1-3, 5, bmm'."""
    numbered = sorted(c for c in cases if isinstance(c, int))
    runs = []
    for c in numbered:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    parts = [f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in runs]
    return ", ".join(parts + [str(c) for c in cases if not isinstance(c, int)])


def latest(results, field, kind):
    """{kind(run): {case: entry}} over the runs' lists `field` (only runs kind gives one for): of
    two runs of the same kind, the later one's cases replace the earlier one's (a run of a few
    cases with other strategies, or more rounds, after a run of all of them)."""
    kinds = {}
    for r in results:
        k = kind(r) if field in r else None
        if k is not None:
            kinds.setdefault(k, {}).update({c["case"]: c for c in r[field]})
    return kinds


def dtype_label(result):
    """A run's dtype, and its real operand where it has one (tccg.py --real): "c64, A real"."""
    return result.get("dtype", "f64") + (f", {result['real']} real" if result.get("real") else "")


def summary_lines(results):
    """One row per dtype and thread count over the runs' cases, on the medians of the rounds (the
    latest run's of each case); none where no run measured numpy."""
    kinds = latest(results, "cases", lambda r: (dtype_label(r), r["threads"])
                   if "numpy_view" in r["cases"][0] else None)
    if not kinds:
        return []
    lines = ["| run | / roofline: geometric mean, min | cases at ≥ 0.8 | numpy view / einsumdb: "
             "geometric mean, min | numpy contiguous / einsumdb, min | below 0.8 | numpy's view "
             "faster |", "|---|---|---|---|---|---|---|"]
    for (dtype, threads), cases in kinds.items():
        med = {key: {n: statistics.median(c[key]) for n, c in cases.items()}
               for key in ("roofline", "numpy_view", "numpy_contiguous")}
        roof, view, contig = (list(med[k].values()) for k in med)
        low = case_list([n for n, f in med["roofline"].items() if f < 0.8]) or "none"
        faster = case_list([n for n, f in med["numpy_view"].items() if f < 1]) or "none"
        lines.append(f"| {dtype}, {threads} thread{'s' if threads > 1 else ''} | "
                     f"{geomean(roof):.2f}, {min(roof):.2f} | {sum(f >= 0.8 for f in roof)} of "
                     f"{len(roof)} | {geomean(view):.2f}, {min(view):.2f} | {min(contig):.2f} | "
                     f"{low} | {faster} |")
    return lines


def tune_summary_lines(results):
    """One row per dtype and build over the runs' tunes (the latest run's of each case): the
    longest tune and the largest peak RSS over the footprint (each the worst round of a case) and
    how many cases stayed within the limits (60 s and 3 times the footprint) in every round; none
    where no run tuned."""
    kinds = latest(results, "tunes",
                   lambda r: (r.get("dtype", "f64"), r["einsumdb"].rstrip("/").split("/")[-1]))
    if not kinds:
        return []
    lines = ["| tunes | cases | longest tune s (case) | cases within 60 s | largest peak RSS / "
             "footprint (case) | cases within 3× | cases with candidates left out by the time "
             "limit |", "|---|---|---|---|---|---|---|"]
    for (dtype, build), tunes in kinds.items():
        wall = {n: max(x["wall_s"] for x in t["rounds"]) for n, t in tunes.items()}
        ratio = {n: max(x["rss_mib"] for x in t["rounds"]) / t["footprint_mib"]
                 for n, t in tunes.items()}
        cut = [n for n, t in tunes.items() if any(x["not_measured"] for x in t["rounds"])]
        slow, big = max(wall, key=wall.get), max(ratio, key=ratio.get)
        lines.append(f"| {dtype}, {build} | {case_list(sorted(tunes))} | {wall[slow]:.1f} ({slow}) "
                     f"| {sum(w <= 60 for w in wall.values())} of {len(wall)} | "
                     f"{ratio[big]:.2f} ({big}) | {sum(x <= 3 for x in ratio.values())} of "
                     f"{len(ratio)} | {case_list(sorted(cut)) or 'none'} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("run", nargs="+", help="runs of tccg.py --output; several: a section each")
    ap.add_argument("--title", required=True)
    ap.add_argument("--intro", default="")
    ap.add_argument("--summary", action="store_true",
                    help="a table over the runs after the intro: a row per dtype and thread count, "
                    "and for tunes per dtype and build")
    a = ap.parse_args()
    results = []
    for path in a.run:
        with open(path) as f:
            results.append(json.load(f))
    lines = [f"# {a.title}", ""]
    if a.intro:
        lines += [a.intro, ""]
    if a.summary:
        for table in (summary_lines(results), tune_summary_lines(results)):
            lines += table + [""] if table else []
    lines += ["Made by `bench/page_tccg.py` from the runs below.", ""]
    kind = [(dtype_label(r), r.get("threads", 1)) for r in results if "cases" in r]
    for path, result in zip(a.run, results):
        if "cases" in result:
            k = (dtype_label(result), result["threads"])
            heading = f"## {k[0]}, {k[1]} thread(s)" if len(a.run) > 1 else ""
            if kind.count(k) > 1:  # runs of the same dtype and threads: told apart by their cases
                heading += ", cases " + case_list([c["case"] for c in result["cases"]])
            lines += run_lines(result, path, heading) + [""]
        if "tunes" in result:
            heading = (f"## Tuning, {result.get('dtype', 'f64')}, cases "
                       + case_list([t["case"] for t in result["tunes"]])
                       + f", {result['einsumdb'].rstrip('/').split('/')[-1]}")
            lines += tune_lines(result, path, heading) + [""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
