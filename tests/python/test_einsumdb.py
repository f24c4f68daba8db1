"""einsumdb from Python: results equal numpy.einsum on the public cases, the store's transforms
found under other names, named errors, threads, Ctrl-C during tune, no leaked references."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import einsumdb

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"
RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def close(got, want, dtype=np.float64):
    tol = 1e-10 if dtype == np.float64 else 2e-4
    scale = max(1.0, float(np.max(np.abs(want))) if np.size(want) else 1.0)
    assert got.shape == np.shape(want)
    assert np.max(np.abs(got - want), initial=0.0) <= tol * scale


# TCCG-shaped contractions (scaled down), matrix products, diagonals, scalars, reductions.
CASES = [
    ("abc,bda->dc", [(12, 8, 10), (8, 9, 12)]),
    ("abcd,dbea->ec", [(6, 5, 7, 4), (4, 5, 8, 6)]),
    ("degc,gfab->abcdef", [(5, 4, 6, 3), (6, 5, 4, 3)]),
    ("ik,kj->ij", [(33, 17), (17, 25)]),
    ("kj,ik->ij", [(17, 25), (33, 17)]),
    ("ij,j->i", [(40, 30), (30,)]),
    ("ii->i", [(9, 9)]),
    ("ii->", [(9, 9)]),
    ("i,i->", [(50,), (50,)]),
    ("ij->", [(6, 7)]),
    ("ij->ji", [(6, 7)]),
    ("bik,bkj->bij", [(4, 8, 6), (4, 6, 5)]),
    ("fe,ifj,fej->ei", [(4, 100), (10, 4, 6), (4, 100, 6)]),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("subscripts,shapes", CASES)
def test_equals_numpy(db, subscripts, shapes, dtype):
    ops = [rand(*s, dtype=dtype) for s in shapes]
    got = einsumdb.einsum(subscripts, *ops)
    close(got, np.einsum(subscripts, *ops), dtype)
    assert got.dtype == np.result_type(*ops)
    # C-contiguous, but for one operand's transposition or diagonal: numpy's view, as numpy.
    assert got.flags.c_contiguous or subscripts in ("ij->ji", "ii->i")


def test_dgfem_public_cases(db):
    for line in (DATA / "dgfem.jsonl").read_text().splitlines()[:8]:
        case = json.loads(line)
        spec = case["spec"]
        shapes = {k: [min(v, 200) for v in s] for k, s in spec["shapes"].items()}
        arrays = {name: rand(*shape) for name, shape in shapes.items()}
        rows = [[arrays[n] for n in row] for row in spec["batch"]]
        got = einsumdb.batched_einsum(spec["einsum"], rows)
        for g, row in zip(got, rows):
            close(g, np.einsum(spec["einsum"], *row))


def test_batched_rows_sharing_an_operand(db):
    a, u, v = rand(30, 20), rand(20), rand(20)
    ru, rv = einsumdb.batched_einsum("ij,j->i", [[a, u], [a, v]])
    close(ru, a @ u)
    close(rv, a @ v)


def test_non_contiguous_inputs_and_out(db):
    a, b = rand(20, 30), rand(40, 20)
    fortran, reversed_rows, strided = np.asfortranarray(a), b[::-1], b[::2, ::-1]
    close(einsumdb.einsum("ji,kj->ik", fortran, reversed_rows),
          np.einsum("ji,kj->ik", a, b[::-1]))
    close(einsumdb.einsum("kj,ji->ki", strided, fortran[:, :12]),
          np.einsum("kj,ji->ki", b[::2, ::-1], a[:, :12]))
    out = np.zeros((30, 40)).T  # a transposed (F-ordered) output
    assert einsumdb.einsum("ik,kj->ij", b, a, out=out) is out
    close(out, b @ a)
    big_endian = a.astype(">f8")
    close(einsumdb.einsum("ij->j", big_endian), a.sum(axis=0))


def test_prepared_expression(db):
    expr = einsumdb.contract_expression("ik,kj->ij", (16, 16), (16, 16))
    a, b = rand(16, 16), rand(16, 16)
    close(expr(a, b), a @ b)
    out = np.empty((16, 16))
    expr(a, b, out=out)
    close(out, a @ b)
    assert expr.choice["source"] == "default"
    with pytest.raises(einsumdb.SpecError, match="length"):
        expr(rand(16, 8), rand(8, 16))


def test_a_transform_tuned_from_the_cli_is_used_under_other_names(db, cli):
    spec = {"einsum": "ik,kj->ij", "batch": [["A", "B"]],
            "shapes": {"A": [48, 40], "B": [40, 56]}}
    r = subprocess.run([cli, "tune", json.dumps(spec), "--db", db, "--json", "--warmup", "1",
                        "--min-reps", "3", "--min-time", "0"], capture_output=True, text=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    winner = json.loads(r.stdout)["results"][0]
    # Z[p,q] = Σ_r X[r,q] Y[p,r]: operands swapped, every name changed.
    expr = einsumdb.contract_expression("rq,pr->pq", (40, 56), (48, 40))
    choice = expr.choice
    assert choice["source"] == "best known"
    assert choice["strategy"] == winner["strategy"]
    assert "\"i\"" not in json.dumps(choice["params"])
    x, y = rand(40, 56), rand(48, 40)
    close(expr(x, y), y @ x)
    best = einsumdb.Store(db).best("rq,pr->pq", shapes={"X": (40, 56), "Y": (48, 40)})
    assert best["transform"] == winner["strategy"]
    assert not best["approximate"]
    # Many shapes at once: the answers one by one, None where nothing is known.
    store = einsumdb.Store(db)
    specs = [{"einsum": "rq,pr->pq", "batch": [["X", "Y"]],
              "shapes": {"X": [40, 56], "Y": [48, 40]}}, spec,
             json.dumps({"einsum": "ab,bc->ac", "batch": [["P", "Q"]],
                         "shapes": {"P": [3, 5], "Q": [5, 2]}, "dtype": "float32"})]
    many = store.best_many(specs, exact=True)
    assert many[0] == best and many[1] == store.best(spec)
    assert many[2] is None
    with pytest.raises(einsumdb.SpecError, match="spec 1"):
        store.best_many([spec, {"einsum": "ij->"}])


def test_a_chosen_transform_with_cli_style_params(db):
    a, b = rand(12, 9), rand(9, 7)
    for transform, params in [("loop_nest", {"order": "ikj"}), ("ttgt", None),
                              ("loop_nest", {"order": "jik", "block": "k:4"}),
                              ("reference", {"threads": 1})]:
        close(einsumdb.einsum("ik,kj->ij", a, b, transform=transform, params=params), a @ b)
    out = np.empty((12, 7))
    einsumdb.einsum("ik,kj->ij", a, b, out=out, transform="loop_nest", params={"order": "kij"})
    close(out, a @ b)
    with pytest.raises(einsumdb.SpecError, match="unknown strategy 'warp'"):
        einsumdb.einsum("ik,kj->ij", a, b, transform="warp")
    with pytest.raises(einsumdb.SpecError, match="contraction_tree"):
        einsumdb.einsum("ik,kj->ij", a, b, transform="contraction_tree")
    with pytest.raises(einsumdb.SpecError, match="params= goes with transform"):
        einsumdb.einsum("ik,kj->ij", a, b, params={"order": "ikj"})
    close(einsumdb.einsum("ik,kj->ij", a, b, optimize=True), a @ b)  # numpy's, ignored
    with pytest.raises(TypeError, match="'bogus' is an invalid keyword for einsum"):
        einsumdb.einsum("ik,kj->ij", a, b, bogus=True)


def test_facts_recorded_later_are_used_by_the_next_call(db):
    shapes = {"A": [8, 4], "B": [4, 6]}
    assert einsumdb.contract_expression("ik,kj->ij", (8, 4), (4, 6)).choice["source"] == \
        "default"
    einsumdb.Store().record([{"spec": {"einsum": "ik,kj->ij", "batch": [["A", "B"]],
                                       "shapes": shapes},
                              "transform": {"name": "loop_nest",
                                            "params": {"order": [{"index": "k"}, {"index": "i"},
                                                                 {"index": "j"}]}},
                              "seconds": [1e-6], "status": "ok", "max_rel_err": 0}])
    choice = einsumdb.contract_expression("ik,kj->ij", (8, 4), (4, 6)).choice
    assert (choice["source"], choice["strategy"]) == ("best known", "loop_nest")
    a, b = rand(8, 4), rand(4, 6)
    close(einsumdb.einsum("ik,kj->ij", a, b), a @ b)


def test_store_record_show_list_export_import(db, tmp_path):
    line = {"spec": {"einsum": "ik,kj->ij", "batch": [["A", "B"]],
                     "shapes": {"A": [8, 4], "B": [4, 6]}},
            "transform": {"name": "ttgt", "params": {"m": [{"index": "i"}]}},
            "seconds": [1e-5, 1.2e-5], "status": "ok", "max_rel_err": 1e-15, "run": "py"}
    store = einsumdb.Store()
    assert store.path == db
    assert store.record([line])["inserted"] == 1
    rows = store.show(line["spec"])
    assert len(rows) == 1 and rows[0]["transform"]["name"] == "ttgt"
    assert store.show(rows[0]["workload"]["hash"]) == rows
    assert store.list()[0]["ok"] == 1
    exported = store.export()
    other = einsumdb.Store(str(tmp_path / "other.sqlite"))
    assert other.import_(exported)["inserted"] == 1
    assert other.import_(exported)["inserted"] == 0
    assert other.stats()["measurements"] == 1
    with pytest.raises(einsumdb.SpecError, match="max_rel_err"):
        store.record([{**line, "max_rel_err": None}])
    # Checked as `einsumdb record` checks a file's lines, every line before anything is written.
    deep = 1
    for _ in range(70):
        deep = [deep]
    with pytest.raises(einsumdb.SpecError, match="measurement 1: nested deeper than 64"):
        store.record([{**line, "run": "new"}, {**line, "x": deep}])
    with pytest.raises(einsumdb.SpecError, match="measurement 0: unknown key 'speed'"):
        store.record([{**line, "speed": 1}])
    assert store.stats()["measurements"] == 1


def test_symbolic_facts_serve_concrete_calls(db):
    """A fact recorded for Ne elements answers a call at any element count, in other names."""
    line = {"spec": {"einsum": "ik,ek->ei", "batch": [["M", "V"]],
                     "shapes": {"M": [6, 4], "V": ["Ne", 4]}},
            "transform": {"name": "loop_nest",
                          "params": {"order": [{"index": "e"}, {"index": "i"}, {"index": "k"}]}},
            "seconds": [1e-4], "status": "ok", "max_rel_err": 1e-16, "binding": {"Ne": 1000}}
    store = einsumdb.Store()
    assert store.record([line])["inserted"] == 1
    again = store.record([line])
    assert again["inserted"] == 0 and again["runs"] == [None]   # nothing new, no run
    best = store.best("xq,yq->xy", shapes={"A": [777, 4], "B": [6, 4]})
    assert best["match"] == "symbolic" and best["binding"] == {"N0": 777}
    assert best["params"]["order"] == [{"index": "x"}, {"index": "y"}, {"index": "q"}]
    choice = einsumdb.contract_expression("xq,yq->xy", (777, 4), (6, 4)).choice
    assert (choice["source"], choice["strategy"]) == ("best known for its symbolic form",
                                                      "loop_nest")
    w, p = rand(777, 4), rand(6, 4)
    close(einsumdb.einsum("xq,yq->xy", w, p), w @ p.T)
    hash12 = store.list()[0]["hash"][:12]
    assert store.show(hash12)[0]["binding"] == {"N0": 1000}
    with pytest.raises(einsumdb.SpecError, match="no machine with fingerprint"):
        store.best("xq,yq->xy", shapes={"A": [777, 4], "B": [6, 4]}, machine="0123456789ab")
    with pytest.raises(einsumdb.SpecError, match="binding names the symbol 'Nq'"):
        store.record([{**line, "binding": {"Nq": 5}}])


def test_feinsum_facts_import(db):
    data = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "feinsum",
                        "transform_archive_v6.sqlite")
    store = einsumdb.Store()
    first = store.import_feinsum(data)
    assert (first["rows"], first["workloads"], first["inserted"]) == (9036, 144, 9036)
    assert store.import_feinsum(data)["inserted"] == 0
    assert len(store.list()) == 144


def test_bad_input_raises_named_exceptions(db):
    a = rand(3, 4)
    with pytest.raises(TypeError, match="invalid data type for einsum"):
        einsumdb.einsum("ij,jk->ik", a, np.ones((4, 2), dtype=object))
    with pytest.raises(einsumdb.SpecError, match="2 operand"):
        einsumdb.einsum("ij,jk->ik", a)
    with pytest.raises(einsumdb.SpecError, match="column"):
        einsumdb.einsum("ij,jk-ik", a, a.T)
    with pytest.raises(einsumdb.SpecError, match="output 0 has shape"):
        einsumdb.einsum("ij,jk->ik", a, a.T, out=np.zeros((4, 4)))
    with pytest.raises(ValueError, match="read-only"):
        out = np.zeros((3, 3))
        out.flags.writeable = False
        einsumdb.einsum("ij,jk->ik", a, a.T, out=out)
    with pytest.raises(einsumdb.DatabaseError):
        pathlib.Path(db).write_text("not a database")
        einsumdb.Store(db).stats()
    assert issubclass(einsumdb.SpecError, einsumdb.Error)
    assert issubclass(einsumdb.SpecError, ValueError)


def test_threads_calling_at_once(db):
    wrong = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for n in range(60):
            k = 4 + n % 3 * 6
            a, b = rng.standard_normal((k, k)), rng.standard_normal((k, k))
            if not np.allclose(einsumdb.einsum("ik,kj->ij", a, b), a @ b):
                wrong.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_no_numpy_reference_leaks(db):
    a, b = rand(8, 8), rand(8, 8)
    out = np.empty((8, 8))
    for _ in range(50):  # warm the caches
        einsumdb.einsum("ik,kj->ij", a, b)
        einsumdb.einsum("ik,kj->ij", a, b, out=out)
    before = (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(out))
    for _ in range(500):
        r = einsumdb.einsum("ik,kj->ij", a, b)
        einsumdb.einsum("ik,kj->ij", a, b, out=out)
        einsumdb.batched_einsum("ij,j->i", [[a, b[0]], [a, b[1]]])
    assert (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(out)) == before
    assert sys.getrefcount(r) == 2  # the result is owned by nothing else


def test_keyboard_interrupt_during_tune_keeps_measurements(db, tmp_path):
    script = tmp_path / "tune.py"
    script.write_text(
        "import os, signal, threading, einsumdb\n"
        "# Ctrl-C raises KeyboardInterrupt whatever this suite was started with (a shell's\n"
        "# background job, say, ignores SIGINT, and Python then installs no handler).\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "started = []\n"
        "def progress(done, total, *rest):\n"
        "    # Ctrl-C once the first candidate is measured, while others are left: how long the\n"
        "    # whole tune takes does not matter.\n"
        "    if not started:\n"
        "        started.append(done)\n"
        "        threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
        "try:\n"
        "    einsumdb.tune('ik,kj->ij', shapes={'A': (160, 160), 'B': (160, 160)},\n"
        "                  warmup=1, min_reps=3, min_time=0.3, progress=progress)\n"
        "except KeyboardInterrupt as e:\n"
        "    print('interrupted:', e)\n"
        "    raise SystemExit(130)\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env={**os.environ, "EINSUMDB_DB": db, "OPENBLAS_NUM_THREADS": "1"},
                       timeout=120)
    assert r.returncode == 130, r.stdout + r.stderr
    assert "candidates measured and recorded" in r.stdout
    stats = einsumdb.Store(db).stats()
    assert stats["measurements"] >= 1
    assert stats["measurements_by_status"]["ok"] >= 1


def test_tune_canonicalize_plan_and_help(db):
    report = einsumdb.tune("ij,j->i", shapes={"A": (64, 32), "x": (32,)}, warmup=1, min_reps=2,
                           min_time=0, progress=False)
    assert report["measured"] == report["candidates"] > 0
    c1 = einsumdb.canonicalize("ij,j->i", shapes={"A": (64, 32), "x": (32,)})
    c2 = einsumdb.canonicalize({"einsum": "qp,p->q", "batch": [["M", "v"]],
                                "shapes": {"M": [64, 32], "v": [32]}})
    assert c1["key"] == c2["key"] == einsumdb.canonicalize(c1["canonical"])["key"]
    assert sorted(c2["sigma"]["array"].values()) == ["M", "v"]
    assert sorted(c1["sigma"]["array"].values()) == ["A", "x"]
    graph = {"inputs": {"A": {"shape": [64, 32]}, "B": {"shape": [32, 64]}},
             "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]}]}
    assert einsumdb.plan(graph, 2)["procs"] == 2
    assert "numpy.einsum" in einsumdb.einsum.__doc__
    assert "ttgt" in einsumdb.strategies()
    assert len(einsumdb.machine()["fingerprint"]) == 32


def test_typed_results_read_as_the_clis_json(db, cli):
    # The typed results carry the fields of the JSON the CLI prints for the same object, as
    # attributes and as a mapping; as_dict() is that JSON (with None for a field that does not
    # apply, where the CLI leaves the key out).
    spec = {"einsum": "ik,kj->ij", "batch": [["A", "B"]], "shapes": {"A": [24, 16], "B": [16, 8]}}
    report = einsumdb.tune(spec, db=db, warmup=1, min_reps=2, min_time=0, progress=False)
    assert isinstance(report, einsumdb.TuneReport)
    assert all(isinstance(r, einsumdb.TuneResult) for r in report.results)
    assert report.best is not None and report.best.status == "ok"
    assert report.best.median_s == min(r.median_s for r in report.results if r.status == "ok")
    answer = einsumdb.Store(db).best(spec)
    assert isinstance(answer, einsumdb.Answer)
    assert answer.transform == answer["transform"] == report.best.strategy
    r = subprocess.run([cli, "best", json.dumps(spec), "--db", db, "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    printed = printed[0] if isinstance(printed, list) else printed
    mine = {k: v for k, v in answer.as_dict().items() if v is not None}
    assert {k: printed[k] for k in mine} == mine
    assert list(answer.keys()) == list(einsumdb.Answer._fields)
    assert "gflops" in answer and answer.get("nothing", 7) == 7
    with pytest.raises(KeyError):
        answer["nothing"]
    assert repr(answer).startswith("einsumdb.Answer(transform=")
    c = einsumdb.canonicalize(spec)
    assert isinstance(c, einsumdb.CanonicalForm) and c.hash == answer.hash
    assert c == einsumdb.canonicalize(json.dumps(spec)) and c != einsumdb.canonicalize(
        "ij,j->i", shapes={"A": (4, 3), "x": (3,)})
    rows = einsumdb.Store(db).list()
    assert [w.hash for w in rows] == [c.hash] and rows[0].best_strategy == answer.transform
    choice = einsumdb.contract_expression("ik,kj->ij", (24, 16), (16, 8), db=db).choice
    assert isinstance(choice, einsumdb.Choice) and choice.strategy == answer.transform
    assert json.dumps(report.as_dict())  # plain data throughout


def test_typed_fields_are_the_clis_keys(db, cli):
    # The CLI's JSON (to_json in C++) and the typed classes' fields (the bindings) are written
    # apart; this keeps them one vocabulary. Each class's fields are the keys the CLI prints for
    # the same object, except that a tune's report and its rows print more than their fields.
    spec = {"einsum": "ij,j->i", "batch": [["A", "x"]], "shapes": {"A": [32, 16], "x": [16]}}
    text = json.dumps(spec)

    def printed(*args, store=True):  # canon prints JSON to a pipe and takes no store
        r = subprocess.run([cli, *args, *(["--db", db, "--json"] if store else [])],
                           capture_output=True, text=True,
                           env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    report = printed("tune", text, "--warmup", "1", "--min-reps", "2", "--min-time", "0")
    # The command adds what it knows beside the report (the machine, the roofline, ...).
    assert set(einsumdb.TuneReport._fields) <= set(report)
    ok = [row for row in report["results"] if row["status"] == "ok"]
    assert ok
    for row in ok:  # a finalist's search median and a failure's error aside
        assert set(einsumdb.TuneResult._fields) <= set(row) | {"search_median_s", "error"}
    best = printed("best", text)
    best = best[0] if isinstance(best, list) else best
    optional = {"distance", "binding", "measured_on", "origin"}  # printed where they apply
    assert set(best) <= set(einsumdb.Answer._fields) <= set(best) | optional
    (row,) = printed("list")
    assert set(row) == set(einsumdb.Workload._fields)
    assert set(printed("canon", text, store=False)) == set(einsumdb.CanonicalForm._fields)
    assert set(einsumdb.contract_expression("ij,j->i", (32, 16), (16,), db=db).choice.keys()) == \
        {"strategy", "params", "source", "reason", "stored", "distance"}


def test_dict_inputs_are_read_as_json_values(db):
    # Specs, measurements and graphs given as dicts reach the parsers as JSON values: numpy's
    # integers as lengths, errors that name the value, and nesting refused before it is walked.
    n = np.int64(12)
    c = einsumdb.canonicalize("ij,j->i", shapes={"A": (n, 5), "x": (np.int32(5),)})
    assert c == einsumdb.canonicalize("ij,j->i", shapes={"A": (12, 5), "x": (5,)})
    deep = []
    for _ in range(10000):
        deep = [deep]
    with pytest.raises(einsumdb.SpecError, match="the spec: nested deeper than 64"):
        einsumdb.canonicalize({"einsum": "ij->", "batch": deep})
    with pytest.raises(einsumdb.SpecError, match="the spec"):
        einsumdb.canonicalize({"einsum": "ij->", "shapes": {"A": {1, 2}}})
    with pytest.raises(einsumdb.SpecError, match="measurement 0"):
        einsumdb.Store(db).record([{"spec": deep}])
    with pytest.raises(einsumdb.SpecError, match=r"params\['order'\]"):
        einsumdb.einsum("ij,jk->ik", rand(3, 4), rand(4, 5), transform="loop_nest",
                        params={"order": {1}})


def test_tune_time_limit_ends_a_large_workloads_search(db):
    # 640³ loop iterations: large enough to be probed, so the time limit applies. With a limit
    # this short the search ends after the first candidate measured; the rest are not recorded.
    shapes = {"A": (640, 640), "B": (640, 640)}
    report = einsumdb.tune("ik,kj->ij", shapes=shapes, warmup=1, min_reps=2, min_time=0,
                           time_limit=0.001, progress=False)
    assert report["time_limit_reached"]
    assert report["not_measured"] > 0
    assert report["measured"] + report["not_measured"] == report["candidates"]
    assert any(r["status"] == "ok" for r in report["results"])
    with pytest.raises(einsumdb.SpecError, match="time limit"):
        einsumdb.tune("ik,kj->ij", shapes=shapes, time_limit=-1, progress=False)


def test_one_version_everywhere(cli):
    # The version is written once, on the project() line of CMakeLists.txt: the package's
    # metadata (when installed), the module's machine record and the CLI all give it.
    import importlib.metadata
    import re
    root = pathlib.Path(__file__).resolve().parents[2]
    want = re.search(r"project\(einsumdb VERSION ([0-9.]+)",
                     (root / "CMakeLists.txt").read_text()).group(1)
    if os.environ.get("EINSUMDB_EXPECT_INSTALLED") == "1":
        assert importlib.metadata.version("einsumdb") == want
    assert einsumdb.machine()["description"]["einsumdb"] == want
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"einsumdb {want}"
