#!/usr/bin/env bash
# einsumdb report on a large store: fills a fresh file with WORKLOADS workloads and MEASUREMENTS
# measurements (defaults 100,000 and 1,000,000, through `einsumdb bench db`), then, in the same
# run, three times each:
#   - writes the report (wall time and peak RSS, /usr/bin/time), against `einsumdb stats` on the
#     same file (a baseline that reads every table once);
#   - loads the page in headless Chromium (--dump-dom) against an empty page (the browser's own
#     start-up), when chromium is installed.
# Prints min / median / max and the ratios, and writes them as JSON to $OUT when it is set (the
# performance page docs/performance/report.md is made from such files by
# bench/page_report.py). Usage: [OUT=FILE] bench/report.sh [WORKLOADS] [MEASUREMENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
install_deps
build_release >/dev/null
workloads="${1:-100000}"
measurements="${2:-1000000}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=build/bin/einsumdb
echo "filling $dir/db.sqlite: $workloads workloads, $measurements measurements ..."
"$bin" bench db --db "$dir/db.sqlite" --workloads "$workloads" --measurements "$measurements" \
  >/dev/null
echo '<!DOCTYPE html><html><body></body></html>' > "$dir/empty.html"
timed() {  # timed OUT CMD...: wall seconds and peak RSS (kB) of CMD appended to OUT.times, its
           # output in OUT.out
  local out=$1
  shift
  /usr/bin/time -f "%e %M" -o "$dir/t" "$@" >"$out.out" 2>/dev/null
  cat "$dir/t" >> "$out.times"
}
for i in 1 2 3; do
  timed "$dir/report" "$bin" report --db "$dir/db.sqlite" -o "$dir/report.html" --json
  timed "$dir/stats" "$bin" stats --db "$dir/db.sqlite" --json
  if command -v chromium >/dev/null; then
    flags=(--headless --no-sandbox --disable-gpu --no-first-run "--user-data-dir=$dir/profile")
    timed "$dir/page" chromium "${flags[@]}" --dump-dom "file://$dir/report.html"
    timed "$dir/empty" chromium "${flags[@]}" --dump-dom "file://$dir/empty.html"
  fi
done
python3 - "$dir" "$(stat -c %s "$dir/report.html")" "$(stat -c %s "$dir/db.sqlite")" \
  "${OUT:-}" "$workloads" "$measurements" "$(lscpu | sed -n 's/^Model name: *//p')" <<'PY'
import json, os, statistics, sys
d, page_bytes, db_bytes, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def read(name):
    path = os.path.join(d, name + ".times")
    if not os.path.exists(path):
        return None
    rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
    return [r[0] for r in rows], [r[1] for r in rows]
def spread(v):
    return f"{min(v):.2f} / {statistics.median(v):.2f} / {max(v):.2f}"
rep, stats = read("report"), read("stats")
print(f"store {db_bytes / 2**20:.0f} MiB; page {page_bytes / 1e6:.2f} MB")
print(f"report: {spread(rep[0])} s (min / median / max of 3), peak RSS {max(rep[1]) / 1024:.0f} MiB")
print(f"stats:  {spread(stats[0])} s; report / stats: "
      f"{spread([a / b for a, b in zip(rep[0], stats[0])])}x")
page, empty = read("page"), read("empty")
if page:
    print(f"chromium loads the page: {spread(page[0])} s; an empty page: {spread(empty[0])} s; "
          f"extra {spread([a - b for a, b in zip(page[0], empty[0])])} s")
else:
    print("chromium is not installed: page load not measured")
if out:
    summary = json.load(open(os.path.join(d, "report.out")))
    json.dump({"command": "bench/report.sh " + sys.argv[5] + " " + sys.argv[6],
               "cpu": sys.argv[7], "cores": os.cpu_count(), "workloads": int(sys.argv[5]),
               "measurements": int(sys.argv[6]), "store_bytes": db_bytes,
               "page_bytes": page_bytes, "page": summary,
               "report_s": rep[0], "report_peak_rss_kib": rep[1], "stats_s": stats[0],
               "chromium_page_s": page[0] if page else None,
               "chromium_empty_s": empty[0] if page else None}, open(out, "w"), indent=1)
    print("written", out)
PY
