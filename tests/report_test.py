"""einsumdb report as a person sees it: the page written for a store built here with known facts
(names full of markup among them) is well-formed, escapes every name, holds the expected number
of points, and renders in headless Chromium to a picture that is not blank."""
import json
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

EINSUMDB = os.environ.get("EINSUMDB_BIN", "einsumdb")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SVG = "{http://www.w3.org/2000/svg}"
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")

# Names as a tuner may write them: markup, entities and quotes must stay text.
LABEL = "<script>alert(\"run\")</script> & 'nightly'"
STRATEGY = "<b>bold</b>&co"
NOTE = "</title><img src=x onerror=alert(1)>"


def cli(*args, db):
    r = subprocess.run([EINSUMDB, *args, "--db", db], capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def spec(m, k, n):
    return {"einsum": "ik,kj->ij", "batch": [["A", "B"]], "shapes": {"A": [m, k], "B": [k, n]}}


def measurement(s, name, seconds, status="ok", params=None):
    line = {"spec": s, "transform": {"name": name, "params": params or {}}, "seconds": seconds,
            "status": status, "run": LABEL}
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


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    db = str(d / "facts.sqlite")
    # The machine's roofline is measured by a tune (a tiny one).
    cli("tune", "ik,kj->ij", "--shape", "A=8x8", "B=8x8", "--strategies", "loop_nest",
        "--min-time", "0", "--min-reps", "1", "--warmup", "1", "--json", db=db)
    lines = [measurement(spec(64, 32, 48), "ttgt", [1e-5, 1.2e-5, 1.1e-5]),
             measurement(spec(64, 32, 48), STRATEGY, [2e-5, 2.5e-5], params={"note": NOTE}),
             measurement(spec(64, 32, 48), "broken", [1e-8], status="invalid"),
             measurement(spec(64, 32, 48), "slow", [1e-2, 1.1e-2], status="timeout"),
             measurement(spec(64, 32, 48), "thrower", [], status="failed"),
             measurement(spec(128, 128, 128), "ttgt", [2e-4, 2.1e-4]),
             measurement(spec(500, 4, 3), "loop_nest", [3e-5])]
    path = d / "m.jsonl"
    path.write_text("\n".join(json.dumps(l) for l in lines) + "\n")
    cli("record", "--file", str(path), db=db)
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


def test_the_page_is_well_formed_escaped_and_complete(store):
    db, page, summary = store
    # Four workloads with a verified time: the three recorded and the tuned one.
    assert summary["points"] == 4 and summary["points_drawn"] == 4
    assert summary["partitionings"] == 2
    text = open(page, encoding="utf-8").read()
    root = ET.fromstring(text)  # well-formed, or this raises
    assert "<script" not in text and "<b>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(&quot;run&quot;)&lt;/script&gt; &amp; &#39;nightly&#39;" in text
    assert "&lt;b&gt;bold&lt;/b&gt;&amp;co" in text
    points = [c for c in root.iter(SVG + "circle") if "pt" in c.get("class", "").split()]
    assert len([p for p in points if "part" not in p.get("class")]) == 4
    assert len([p for p in points if "part" in p.get("class")]) == 2
    # The one machine has a measured roof, so every point has a fraction of it.
    roofs = [p for p in root.iter(SVG + "polyline") if "roof" in p.get("class", "")]
    assert roofs
    # Candidates: every status told apart, the winner marked.
    groups = [g for g in root.iter(SVG + "g") if "cand" in g.get("class", "").split()]
    kinds = {g.get("class").split()[1] for g in groups}
    assert {"winner", "ok", "invalid", "timeout"} <= kinds, kinds
    winner = [g for g in groups if "winner" in g.get("class")]
    assert len(winner) == 4  # one per workload section
    titles = [w.find(SVG + "title").text for w in winner]
    assert any(t.startswith("ttgt {}") and "median 11 us" in t for t in titles), titles
    assert "1 candidate(s) failed" in text


def test_a_bad_machine_or_workload_is_named(store):
    db, page, _ = store
    r = subprocess.run([EINSUMDB, "report", "--db", db, "-o", page + ".x", "--machine",
                        "0123456789ab"], capture_output=True, text=True)
    assert r.returncode == 2 and "no machine with fingerprint 0123456789ab" in r.stderr
    r = subprocess.run([EINSUMDB, "report", "--db", db, "-o", page + ".x", "--workload",
                        "ffffffffffff"], capture_output=True, text=True)
    assert r.returncode == 2 and "no workload with hash ffffffffffff" in r.stderr
    assert not os.path.exists(page + ".x") and not os.path.exists(page + ".x.partial")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/lib.sh "
                                             "installs it from Debian)")
def test_chromium_renders_it(store, tmp_path):
    db, page, _ = store
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--user-data-dir=" + str(tmp_path / "profile")]
    dom = subprocess.run(flags + ["--dump-dom", "file://" + page], capture_output=True,
                         text=True, timeout=120).stdout
    # What the browser built: every point, no element from a name, the names as text.
    assert dom.count('class="pt ') == 6
    assert "<script" not in dom and "<img" not in dom and "<b>" not in dom
    assert "&lt;b&gt;bold&lt;/b&gt;&amp;co" in dom
    shot = str(tmp_path / "page.png")
    subprocess.run(flags + ["--window-size=1200,1600", "--screenshot=" + shot, "file://" + page],
                   capture_output=True, timeout=120)
    width, height, channels, rows = png_pixels(shot)
    assert (width, height) == (1200, 1600)
    colors, ink = set(), 0
    for row in rows[::4]:
        for x in range(0, width * channels, channels * 4):
            px = row[x:x + 3]
            colors.add(px)
            ink += px != b"\xff\xff\xff"
    sampled = (height // 4) * (width // 4)
    assert len(colors) > 20, "the page rendered nearly uniform"
    assert ink / sampled > 0.02, "the page rendered blank"
