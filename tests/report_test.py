"""einsumdb report as an analyst sees it: the page written for a store built here with known facts
(names full of markup among them) is well-formed, escapes every name, orders and groups its
machines, shows every candidate's parameters whole, compares two machines, finds the facts that
got slower, and in headless Chromium fits 1280 px, filters and sorts from its address, says
everything without script, and renders to a picture that is not blank."""
import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

EINSUMDB = os.environ.get("EINSUMDB_BIN", "einsumdb")
FEINSUM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "feinsum",
                       "transform_archive_v6.sqlite")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")

# Names as a tuner may write them: markup, entities and quotes must stay text.
LABEL = "<script>alert(\"run\")</script> & 'nightly'"
STRATEGY = "<b>bold</b>&co"
NOTE = "</title><img src=x onerror=alert(1)>"
DEVICE = "Accel <i>X</i> & 'co'"
LONG_VALUE = ",".join(f"stage{k}:tile{k * 7 % 13}" for k in range(40))  # 400 characters, no space


def accelerator(driver):
    return {"cpu_model": DEVICE, "cores": 1, "isa": "", "blas": driver}


def cli(*args, db):
    r = subprocess.run([EINSUMDB, *args, "--db", db], capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def spec(m, k, n):
    return {"einsum": "ik,kj->ij", "batch": [["A", "B"]], "shapes": {"A": [m, k], "B": [k, n]}}


def measurement(s, name, seconds, status="ok", params=None, machine=None, run=LABEL):
    line = {"spec": s, "transform": {"name": name, "params": params or {}}, "seconds": seconds,
            "status": status, "run": run}
    if machine:
        line["machine"] = machine
    if status in ("ok", "invalid"):
        line["max_rel_err"] = 1e-15 if status == "ok" else 0.5
    return line


def png_pixels(path):
    """Width, height and the RGB(A) rows of an 8-bit PNG (the only kind Chromium writes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def record(d, db, lines, name):
    path = d / name
    path.write_text("\n".join(json.dumps(l) for l in lines) + "\n")
    cli("record", "--file", str(path), db=db)


def machines_of(db):
    stats = json.loads(cli("stats", "--json", db=db))
    return {(m["cpu_model"], m["blas"]): m["fingerprint"] for m in stats["by_machine"]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    db = str(d / "facts.sqlite")
    # The machine's roofline is measured by a tune (a tiny one).
    cli("tune", "ik,kj->ij", "--shape", "A=8x8", "B=8x8", "--strategies", "loop_nest",
        "--min-time", "0", "--min-reps", "1", "--warmup", "1", "--json", db=db)
    lines = [measurement(spec(64, 32, 48), "ttgt", [1e-5, 1.2e-5, 1.1e-5]),
             measurement(spec(64, 32, 48), STRATEGY, [2e-5, 2.5e-5], params={"note": NOTE}),
             measurement(spec(64, 32, 48), "tensor_gemm", [3e-5, 3.1e-5],
                         params={"schedule": LONG_VALUE, "mr": 4}),
             measurement(spec(64, 32, 48), "broken", [1e-8], status="invalid"),
             measurement(spec(64, 32, 48), "slow", [1e-2, 1.1e-2], status="timeout"),
             measurement(spec(64, 32, 48), "thrower", [], status="failed"),
             measurement(spec(128, 128, 128), "ttgt", [2e-4, 2.1e-4]),
             measurement(spec(500, 4, 3), "loop_nest", [3e-5])]
    # Two runs of one workload: ttgt twice as slow in the second (beyond both spreads), loop_nest
    # within them.
    record(d, db, lines + [
        measurement(spec(96, 96, 96), "ttgt", [1e-4, 1.01e-4, 1.02e-4], run="first"),
        measurement(spec(96, 96, 96), "loop_nest", [3e-4, 3.5e-4, 4e-4], run="first")], "a.jsonl")
    record(d, db, [
        measurement(spec(96, 96, 96), "ttgt", [2e-4, 2.02e-4, 2.05e-4], run="second"),
        measurement(spec(96, 96, 96), "loop_nest", [3.1e-4, 3.6e-4], run="second")], "b.jsonl")
    # One device with two drivers, each holding more workloads than this machine; the winner
    # differs between the drivers on one workload. And a machine with nothing verified.
    accel = []
    for k, (m, kk, n) in enumerate([(16, 16, 16), (32, 16, 8), (64, 32, 48), (128, 128, 128),
                                    (8, 8, 8), (24, 12, 6), (48, 24, 12), (40, 20, 10)]):
        for driver in ("drv 1 <old>", "drv 2"):
            fast, slow = ("ttgt", "loop_nest") if k or driver == "drv 2" else ("loop_nest", "ttgt")
            accel.append(measurement(spec(m, kk, n), fast, [1e-6 * (k + 1)], run="accel",
                                     machine=accelerator(driver)))
            accel.append(measurement(spec(m, kk, n), slow, [5e-6 * (k + 1)], run="accel",
                                     machine=accelerator(driver)))
    accel.append(measurement(spec(16, 16, 16), "broken", [1e-8], status="invalid", run="empty",
                             machine={"cpu_model": "Empty <box>", "cores": 2, "isa": "",
                                      "blas": "none"}))
    record(d, db, accel, "accel.jsonl")
    graph = d / "g.json"
    graph.write_text(json.dumps({
        "inputs": {"A": {"shape": [64, 48]}, "B": {"shape": [48, 32]}, "C": {"shape": [32, 16]}},
        "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
                  {"name": "ABC", "einsum": "ij,jk->ik", "inputs": ["AB", "C"]}]}))
    # Open MPI's own allocations outlive MPI_Finalize: not leaks of ours (as in distributed_test).
    mpi_env = dict(ENV, ASAN_OPTIONS="detect_leaks=0", OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
                   OMPI_MCA_btl_vader_single_copy_mechanism="none")
    r = subprocess.run(["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", EINSUMDB,
                        "run", str(graph), "--db", db, "--json"], capture_output=True, text=True,
                       env=mpi_env, timeout=120)
    assert r.returncode == 0, r.stderr
    page = str(d / "report.html")
    summary = json.loads(cli("report", "-o", page, "--json", db=db))
    return db, page, summary


def parse(page):
    text = open(page, encoding="utf-8").read()
    return text, ET.fromstring(text)  # well-formed, or this raises


def by_class(root, tag, cls):
    return [e for e in root.iter(XHTML + tag) if cls in e.get("class", "").split()]


def text_of(e):
    return "".join(e.itertext())


def test_the_page_is_well_formed_escaped_and_complete(store):
    db, page, summary = store
    # This machine's five workloads with a verified time (the tuned one, four recorded) and the
    # accelerator's eight on each of its two drivers.
    assert summary["points"] == 5 + 16 and summary["points_drawn"] == 21
    assert summary["partitionings"] == 2
    text, root = parse(page)
    # One script, the page's own; every name from the store is text.
    assert text.count("<script") == 1 and "<b>" not in text and "<img" not in text
    assert "<i>" not in text
    assert "&lt;script&gt;alert(&quot;run&quot;)&lt;/script&gt; &amp; &#39;nightly&#39;" in text
    assert "&lt;b&gt;bold&lt;/b&gt;&amp;co" in text
    assert "Accel &lt;i&gt;X&lt;/i&gt; &amp; &#39;co&#39;" in text
    assert "drv 1 &lt;old&gt;" in text and "Empty &lt;box&gt;" in text
    assert "note=&lt;/title&gt;&lt;img src=x onerror=alert(1)&gt;" in text
    points = [c for c in root.iter(SVG + "circle") if "pt" in c.get("class", "").split()]
    assert len([p for p in points if "part" not in p.get("class")]) == 21
    assert len([p for p in points if "part" in p.get("class")]) == 2
    roofs = [p for p in root.iter(SVG + "polyline") if "roof" in p.get("class", "")]
    assert roofs
    # Candidates: every status told apart, the winner marked, once per workload section.
    cands = by_class(root, "tr", "cand")
    kinds = {r.get("class").split()[1] for r in cands}
    assert {"winner", "ok", "invalid", "timeout"} <= kinds, kinds
    sections = by_class(root, "section", "workload")
    assert len(sections) == summary["workloads"] and len(sections) >= 4
    for section in sections:
        assert len(by_class(section, "tr", "winner")) == 1
    assert "1 candidate(s) failed" in text


def test_machines_this_one_first_a_device_s_drivers_together_the_empty_in_one_line(store):
    db, page, summary = store
    text, root = parse(page)
    devices = by_class(root, "section", "device")
    # This machine (five points) before the accelerator (sixteen), whose drivers are one section.
    assert summary["devices"] == 3 and summary["devices_drawn"] == 2
    assert len(devices) == 2
    assert "this machine" in text_of(devices[0].find(XHTML + "h3"))
    assert text_of(devices[1].find(XHTML + "h3")) == DEVICE
    drivers = devices[1].find(XHTML + "table").find(XHTML + "tbody").findall(XHTML + "tr")
    assert [text_of(r.find(XHTML + "td")) for r in drivers] == ["drv 1 <old>", "drv 2"]
    # The machine with nothing to draw: one line, saying why.
    details = list(root.iter(XHTML + "details"))
    assert len(details) == 1
    said = text_of(details[0])
    assert "1 more device(s)" in said and "Empty <box>" in said
    assert "no verified measurement" in said
    assert "No verified measurement with a known work and byte count" not in text


def test_every_candidate_shows_its_parameters_whole_and_what_differs_from_the_winner(store):
    db, page, _ = store
    _, root = parse(page)
    kv = [text_of(e) for e in by_class(root, "span", "kv")]
    assert "schedule=" + LONG_VALUE in kv  # whole, not cut
    assert "mr=4" in kv
    # In the section of spec(64, 32, 48), ttgt wins with no parameters: the others' are marked.
    section = [s for s in by_class(root, "section", "workload")
               if any("tensor_gemm" in text_of(r) for r in by_class(s, "tr", "cand"))][0]
    rows = by_class(section, "tr", "cand")
    assert "winner" in rows[0].get("class") and "ttgt" in text_of(rows[0])
    gemm = [r for r in rows if "tensor_gemm" in text_of(r)][0]
    names = by_class(gemm, "span", "name")
    assert names and "diff" in names[0].get("class")


def test_strategies_are_drawn_as_distributions_of_their_fraction_of_the_roof(store):
    db, page, summary = store
    _, root = parse(page)
    table = [t for t in root.iter(XHTML + "table") if t.get("id") == "strategies"][0]
    rows = table.find(XHTML + "tbody").findall(XHTML + "tr")
    assert len(rows) == summary["strategies"] >= 3
    for r in rows:
        cells = r.findall(XHTML + "td")
        q = [float(c.get("data-v")) for c in cells[2:7]]
        assert q == sorted(q) and 0 < q[0], q
        assert r.find(".//" + SVG + "rect") is not None


def test_the_fact_that_got_slower_is_named_and_the_one_within_its_spread_is_not(store):
    db, page, summary = store
    assert summary["slowdowns"] == 1
    _, root = parse(page)
    table = [t for t in root.iter(XHTML + "table") if t.get("id") == "slowdowns"][0]
    rows = table.find(XHTML + "tbody").findall(XHTML + "tr")
    assert len(rows) == 1
    said = text_of(rows[0])
    assert "ttgt" in said and "first" in said and "second" in said
    assert 1.9 < float(rows[0].findall(XHTML + "td")[-1].get("data-v")) < 2.1


def test_two_machines_side_by_side_the_differing_winner_first(store, tmp_path):
    db, _, _ = store
    fp = machines_of(db)
    old, new = fp[(DEVICE, "drv 1 <old>")], fp[(DEVICE, "drv 2")]
    page = str(tmp_path / "compare.html")
    summary = json.loads(cli("report", "-o", page, "--compare", old[:8], new[:8], "--json", db=db))
    assert summary["compared"] == 8 and summary["compared_differ"] == 1
    _, root = parse(page)
    table = [t for t in root.iter(XHTML + "table") if t.get("id") == "compare"][0]
    rows = table.find(XHTML + "tbody").findall(XHTML + "tr")
    assert len(rows) == 8 and rows[0].get("class") == "differs"
    assert all(r.get("class") == "same" for r in rows[1:])
    first = rows[0].findall(XHTML + "td")
    assert "loop_nest" in text_of(first[1]) and "ttgt" in text_of(first[3])
    if CHROMIUM:  # and as the browser builds it
        out = dom(tmp_path, "file://" + page)
        table = out[out.index('id="compare"'):]
        table = table[:table.index("</table>")]
        assert table.count('<tr class="differs"') == 1 and table.count('<tr class="same"') == 7
        assert '<span class="name diff">ttgt</span>' in table
    # Machines named wrongly are refused with what was wrong.
    for args, said in [(["zzzz", new[:8]], "machine 'zzzz'"),
                       ([old, old], "names the same machine twice"),
                       ([old], "--compare")]:
        r = subprocess.run([EINSUMDB, "report", "--db", db, "-o", page + ".x", "--compare", *args],
                           capture_output=True, text=True)
        assert r.returncode != 0 and said in r.stderr, r.stderr
        assert not os.path.exists(page + ".x")


def test_feinsum_s_device_is_one_section_of_nine_drivers_after_this_machine(tmp_path):
    # The demo's store: this machine, and Feinsum's facts from one GPU under nine drivers.
    db = str(tmp_path / "f.sqlite")
    cli("tune", "ik,kj->ij", "--shape", "A=8x8", "B=8x8", "--strategies", "loop_nest",
        "--min-time", "0", "--min-reps", "1", "--warmup", "1", "--json", db=db)
    cli("import", "--from", "feinsum", FEINSUM, db=db)
    page = str(tmp_path / "f.html")
    summary = json.loads(cli("report", "-o", page, "--json", db=db))
    assert summary["machines"] == 10 and summary["devices"] == 2
    _, root = parse(page)
    devices = by_class(root, "section", "device")
    assert "this machine" in text_of(devices[0].find(XHTML + "h3"))
    gpu = devices[1]
    assert text_of(gpu.find(XHTML + "h3")) == "NVIDIA_TITAN_V"
    drivers = gpu.find(XHTML + "table").find(XHTML + "tbody").findall(XHTML + "tr")
    assert len(drivers) == 9
    assert all(text_of(r.find(XHTML + "td")).startswith("NVIDIA Corporation-") for r in drivers)


def test_the_index_is_capped_and_says_what_it_left_out(store, tmp_path):
    db, _, _ = store
    page = str(tmp_path / "capped.html")
    summary = json.loads(cli("report", "-o", page, "--max-rows", "3", "--json", db=db))
    assert summary["index_rows"] == 3 and summary["points"] == 21
    text, root = parse(page)
    assert "The first 3 of 21" in text
    table = [t for t in root.iter(XHTML + "table") if t.get("id") == "index"][0]
    assert len(table.find(XHTML + "tbody").findall(XHTML + "tr")) == 3
    r = subprocess.run([EINSUMDB, "report", "--db", db, "-o", page + ".x", "--max-rows", "0"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--max-rows must be at least 1" in r.stderr


def test_a_bad_machine_or_workload_is_named(store):
    db, page, _ = store
    r = subprocess.run([EINSUMDB, "report", "--db", db, "-o", page + ".x", "--machine",
                        "0123456789ab"], capture_output=True, text=True)
    assert r.returncode == 2 and "no machine with fingerprint 0123456789ab" in r.stderr
    r = subprocess.run([EINSUMDB, "report", "--db", db, "-o", page + ".x", "--workload",
                        "ffffffffffff"], capture_output=True, text=True)
    assert r.returncode == 2 and "no workload with hash ffffffffffff" in r.stderr
    assert not os.path.exists(page + ".x") and not os.path.exists(page + ".x.partial")


def test_without_script_the_page_shows_everything(store):
    _, page, _ = store
    text, root = parse(page)
    controls = [e for e in root.iter(XHTML + "div") if e.get("id") == "controls"][0]
    assert controls.get("hidden") == "hidden"
    assert not [e for e in root.iter() if "off" in (e.get("class") or "").split()]


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                    "(scripts/lib.sh installs it from Debian)")


def chromium(tmp_path, *args):
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--user-data-dir=" + str(tmp_path / "profile")]
    return subprocess.run(flags + list(args), capture_output=True, text=True, timeout=120)


def dom(tmp_path, url, *args):
    """The document Chromium built, parsed (it serialises HTML; closed void elements make it XML
    enough for ElementTree once the doctype is dropped)."""
    text = chromium(tmp_path, "--window-size=1280,1000", *args, "--dump-dom", url).stdout
    return text


@needs_chromium
def test_nothing_runs_off_the_page_at_1280_px(store, tmp_path):
    _, page, _ = store
    # A copy that writes what the browser measured into the document, after the page's script.
    probe = tmp_path / "probe.html"
    text = open(page, encoding="utf-8").read()
    probe.write_text(text.replace("</body>", "<script>document.body.setAttribute('data-width', "
                                  "document.documentElement.scrollWidth + ' ' + "
                                  "document.documentElement.clientWidth);</script></body>"))
    out = dom(tmp_path, "file://" + str(probe))
    m = re.search(r'data-width="(\d+) (\d+)"', out)
    assert m, out[:2000]
    scroll, client = int(m.group(1)), int(m.group(2))
    assert client > 1200 and scroll <= client, (scroll, client)


@needs_chromium
def test_filters_and_sorting_follow_the_address(store, tmp_path):
    db, page, _ = store
    fp = machines_of(db)
    accel = fp[(DEVICE, "drv 1 <old>")][:12]
    def index_rows(html):
        body = html[html.index('id="index"'):]
        body = body[:body.index("</table>")]
        return re.findall(r'<tr class="([^"]*)"[^>]*data-m="([^"]*)"[^>]*data-s="([^"]*)"', body), body
    # Unfiltered, every row shows and the script counted them.
    html = dom(tmp_path, "file://" + page)
    rows, _ = index_rows(html)
    assert len(rows) == 21 and not [r for r in rows if "off" in r[0].split()]
    assert "of" in re.search(r'id="f-shown"[^>]*>([^<]*)<', html).group(1)
    # One machine and one strategy, from the address: only their rows stay.
    html = dom(tmp_path, "file://" + page + "#m=" + accel + "&s=loop_nest")
    rows, _ = index_rows(html)
    kept = [r for r in rows if "off" not in r[0].split()]
    assert kept and all(r[1] == accel and r[2] == "loop_nest" for r in kept)
    assert len(kept) == 1  # the one workload loop_nest wins there
    assert 'class="device off"' in html or 'class="device off' in html
    # A search matches the einsum, hash, strategy and parameters.
    html = dom(tmp_path, "file://" + page + "#q=mr%3D4")
    assert html.count('class="cand ') > 0
    # A dtype's roofs and points hidden.
    html = dom(tmp_path, "file://" + page + "#off=f64")
    assert re.search(r'<body[^>]*class="[^"]*no-f64', html)
    # Sorted by rate, fastest first after two clicks' worth: descending.
    html = dom(tmp_path, "file://" + page + "#sort=index:GFLOP/s")
    _, body = index_rows(html)
    rates = [float(v) for v in re.findall(r'<td class="n" data-v="([^"]*)">[^<]*</td><td class="n" '
                                          r'data-v="[^"]*">[^<]*</td><td class="n"', body)]
    assert len(rates) == 21 and rates == sorted(rates), rates


@needs_chromium
def test_chromium_renders_it(store, tmp_path):
    db, page, _ = store
    out = dom(tmp_path, "file://" + page)
    # What the browser built: every point, no element from a name, the names as text; the
    # device sections in their order, the strategies' box plots, the slower fact, the index.
    assert out.count('class="pt ') == 23
    assert out.count('<section class="device"') == 2 and out.count("<details>") == 1
    sections = out.split('<section class="device"')[1:]
    assert "this machine" in sections[0][:sections[0].index("</h3>")]
    assert "Accel &lt;i&gt;X" in sections[1][:sections[1].index("</h3>")]
    assert re.search(r'id="strategies".*?<rect class="quart"', out, re.S)
    slow = out[out.index('id="slowdowns"'):]
    assert slow[:slow.index("</table>")].count("<tr") == 2  # the head and the one fact
    index = out[out.index('id="index"'):]
    assert index[:index.index("</table>")].count("<tr") == 22
    assert "<img" not in out and "<b>" not in out and "<i>X" not in out
    assert "&lt;b&gt;bold&lt;/b&gt;&amp;co" in out
    shot = str(tmp_path / "page.png")
    chromium(tmp_path, "--window-size=1280,1600", "--screenshot=" + shot, "file://" + page)
    width, height, channels, rows = png_pixels(shot)
    assert (width, height) == (1280, 1600)
    colors, ink = set(), 0
    for row in rows[::4]:
        for x in range(0, width * channels, channels * 4):
            px = row[x:x + 3]
            colors.add(px)
            ink += px != b"\xff\xff\xff"
    sampled = (height // 4) * (width // 4)
    assert len(colors) > 20, "the page rendered nearly uniform"
    assert ink / sampled > 0.02, "the page rendered blank"
