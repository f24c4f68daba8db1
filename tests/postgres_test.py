"""The shared store on a real PostgreSQL 15 server: a cluster is created with initdb in a
temporary directory, started with pg_ctl on 127.0.0.1 (password authentication) and stopped at
the end. Every command works against it; concurrent writers, a writer killed mid-run, a server
stopped mid-run and bad connections behave as the store promises; sync moves facts both ways."""
import collections
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

import pytest

EINSUMDB = os.environ.get("EINSUMDB_BIN", "einsumdb")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")
ENV.pop("EINSUMDB_DB", None)
MPI_ENV = dict(ENV, ASAN_OPTIONS="detect_leaks=0", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1")
PASSWORD = "s3cret-pw"


def postgres_bindir():
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    return None


class Server:
    """A PostgreSQL cluster of its own in a temporary directory, run as the postgres user when
    the tests run as root (initdb refuses root)."""

    def __init__(self):
        self.bindir = postgres_bindir()
        self.root = tempfile.mkdtemp(prefix="einsumdb-pg-")
        self.data = os.path.join(self.root, "data")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.as_user = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        pwfile = os.path.join(self.root, "pw")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        if self.as_user:
            shutil.chown(pwfile, "postgres")
        self.pg("initdb", "-D", self.data, "-U", "einsum", "--auth-local=trust",
                "--auth-host=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8")
        self.start()

    def pg(self, tool, *args, check=True):
        return subprocess.run(self.as_user + [os.path.join(self.bindir, tool), *args],
                              capture_output=True, text=True, check=check, cwd=self.root,
                              timeout=120)

    def start(self):
        self.pg("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "log"), "-w", "-o",
                f"-k {self.root} -c listen_addresses=127.0.0.1 -p {self.port} -c fsync=off",
                "start")

    def stop(self, mode="fast"):
        self.pg("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def uri(self, db="postgres", password=PASSWORD):
        return f"postgresql://einsum:{password}@127.0.0.1:{self.port}/{db}"

    def sql(self, db, text):
        r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            self.uri(db), "-c", text], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    def createdb(self, name):
        self.sql("postgres", f"CREATE DATABASE {name}")
        return self.uri(name)

    def close(self):
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    if postgres_bindir() is None or shutil.which("psql") is None:
        pytest.skip("PostgreSQL is not installed here (scripts/lib.sh installs postgresql-15 "
                    "from Debian)")
    s = Server()
    yield s
    s.close()


def cli(*args, db, check=True, timeout=300, env=ENV):
    r = subprocess.run([EINSUMDB, *args, "--db", db], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check:
        assert r.returncode == 0, (args, r.stderr)
    return r


def spec(m, k, n):
    return {"einsum": "ik,kj->ij", "batch": [["A", "B"]], "shapes": {"A": [m, k], "B": [k, n]}}


def measurement_lines(count, seed, label, workloads=50):
    """`count` verified measurements over `workloads` shared workloads and a few shared
    transforms; different seeds give different times (so different measurements)."""
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        w = i % workloads
        t = rng.uniform(1e-4, 1e-3)
        lines.append({"spec": spec(8 + w, 16, 24), "run": label,
                      "transform": {"name": "loop_nest", "params": {"block": i % 7}},
                      "seconds": [t, t * 1.01], "max_rel_err": 1e-15})
    return lines


def write_lines(path, lines):
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return str(path)


def count(server, db, table="measurements"):
    return int(server.sql(db, f"SELECT count(*) FROM {table}"))


def test_every_command_runs_on_the_server(server, tmp_path):
    db = server.createdb("commands")
    recorded = write_lines(tmp_path / "m.jsonl", measurement_lines(20, 1, "first", workloads=4))
    r = json.loads(cli("record", "--file", recorded, "--json", db=db).stdout)
    assert r["inserted"] == 20
    # Recording the same file again is idempotent.
    r = json.loads(cli("record", "--file", recorded, "--json", db=db).stdout)
    assert r["inserted"] == 0 and r["duplicates"] == 20
    tuned = json.loads(cli("tune", "ij,jk->ik", "--shape", "A=32x32", "B=32x32", "--min-time",
                           "0.01", "--min-reps", "3", "--warmup", "1", "--json", db=db).stdout)
    assert tuned["run"] > 0 and tuned["measured"] == tuned["candidates"]
    best = json.loads(cli("best", "ab,bc->ac", "--shape", "A=32x32", "B=32x32", "--json",
                          db=db).stdout)
    assert best["match"] == "exact" and best["measurements"] >= 1
    shown = json.loads(cli("show", tuned["workload"]["hash"][:12], "--json", db=db).stdout)
    assert len(shown["measurements"]) == tuned["candidates"]
    listed = json.loads(cli("list", "--json", db=db).stdout)
    assert len(listed) == 5
    stats = json.loads(cli("stats", "--json", db=db).stdout)
    assert stats["measurements"] == 20 + tuned["candidates"] and stats["schema_version"] == 8
    assert PASSWORD not in json.dumps(stats), "the password must never be printed"
    exported = cli("export", db=db).stdout
    assert len(exported.splitlines()) == stats["measurements"]
    check = json.loads(cli("db", "check", "--json", db=db).stdout)
    assert check["ok"], check
    # Import into a second server database from the export.
    other = server.createdb("imported")
    (tmp_path / "e.jsonl").write_text(exported)
    r = json.loads(cli("import", str(tmp_path / "e.jsonl"), "--json", db=other).stdout)
    assert r[0]["inserted"] == stats["measurements"]
    # The planner and a graph run under mpirun record their partitionings in the server.
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({
        "inputs": {"A": {"shape": [64, 48]}, "B": {"shape": [48, 32]}, "C": {"shape": [32, 16]}},
        "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
                  {"name": "ABC", "einsum": "ij,jk->ik", "inputs": ["AB", "C"]}]}))
    cli("plan", str(graph), "-P", "2", "--record", "--json", db=db)
    planned = count(server, "commands", "partitionings")
    assert planned >= 2
    r = subprocess.run(["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", EINSUMDB,
                        "run", str(graph), "--db", db, "--json"], capture_output=True, text=True,
                       env=MPI_ENV, timeout=180)
    assert r.returncode == 0, r.stderr
    assert int(server.sql("commands", "SELECT count(*) FROM partitionings WHERE "
                                      "measured_seconds IS NOT NULL")) == 2


def test_the_report_reads_the_server(server, tmp_path):
    db = server.createdb("report")
    # A fact measured in two runs, three times slower in the second; a tune for the roofline.
    for label, t in (("first", 1e-4), ("second", 3e-4)):
        line = {"spec": spec(40, 16, 24), "run": label, "max_rel_err": 1e-15,
                "transform": {"name": "loop_nest", "params": {"block": 4}},
                "seconds": [t, t * 1.01, t * 1.02]}
        cli("record", "--file", write_lines(tmp_path / f"{label}.jsonl", [line]), db=db)
    cli("tune", "ij,jk->ik", "--shape", "A=32x32", "B=32x32", "--min-time", "0.01",
        "--min-reps", "3", "--warmup", "1", "--json", db=db)
    page = str(tmp_path / "report.html")
    summary = json.loads(cli("report", "-o", page, "--json", db=db).stdout)
    assert summary["slowdowns"] == 1 and summary["points"] == 2
    assert summary["strategies"] >= 1 and summary["devices_drawn"] == 1
    text = open(page, encoding="utf-8").read()
    ET.fromstring(text)  # well-formed
    assert "second" in text and PASSWORD not in text


def test_eight_concurrent_writers(server, tmp_path):
    db = server.createdb("writers")
    # The same 50 workloads and 7 transforms in every writer: they contend for the same rows.
    files = [write_lines(tmp_path / f"w{k}.jsonl", measurement_lines(2000, 100 + k, f"writer {k}"))
             for k in range(8)]
    procs = [subprocess.Popen([EINSUMDB, "record", "--file", f, "--db", db, "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for f in files]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert err == "", err
        assert json.loads(out)["inserted"] == 2000
    assert count(server, "writers") == 16000
    assert count(server, "writers", "runs") == 8
    assert count(server, "writers", "workloads") == 50
    assert json.loads(cli("db", "check", "--json", db=db).stdout)["ok"]


def wait_until_writing(server, db, timeout=60):
    """Until an einsumdb session of `db` is inside a transaction inserting measurements."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if int(server.sql("postgres", "SELECT count(*) FROM pg_stat_activity WHERE "
                                      f"datname = '{db}' AND application_name = 'einsumdb' AND "
                                      "xact_start IS NOT NULL AND query LIKE "
                                      "'INSERT INTO measurements%'")) > 0:
            return
        time.sleep(0.02)
    raise AssertionError("the writer never started writing its run")


def test_a_writer_killed_mid_run_leaves_no_trace(server, tmp_path):
    db = server.createdb("killed")
    first = write_lines(tmp_path / "a.jsonl", measurement_lines(500, 1, "earlier"))
    cli("record", "--file", first, db=db)
    big = write_lines(tmp_path / "b.jsonl", measurement_lines(60000, 2, "killed", workloads=600))
    p = subprocess.Popen([EINSUMDB, "record", "--file", big, "--db", db], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until_writing(server, "killed")
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    # The server notices the closed connection and rolls the transaction back.
    time.sleep(0.5)
    assert count(server, "killed") == 500
    assert server.sql("killed", "SELECT string_agg(label, ',') FROM runs") == "earlier"
    assert json.loads(cli("db", "check", "--json", db=db).stdout)["ok"]


def test_the_server_stopped_mid_run(server, tmp_path):
    db = server.createdb("stopped")
    big = write_lines(tmp_path / "b.jsonl", measurement_lines(60000, 3, "interrupted",
                                                              workloads=600))
    p = subprocess.Popen([EINSUMDB, "record", "--file", big, "--db", db], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_writing(server, "stopped")
        server.stop("fast")
        out, err = p.communicate(timeout=60)
    finally:
        server.start()
    assert p.returncode == 1, (out, err)
    assert f"127.0.0.1:{server.port}/stopped" in err, err
    assert "was not written" in err and "none of it is in the store" in err, err
    assert PASSWORD not in err
    assert count(server, "stopped") == 0
    # After the restart the same command completes, and nothing is duplicated.
    r = json.loads(cli("record", "--file", big, "--json", db=db).stdout)
    assert r["inserted"] == 60000 and r["duplicates"] == 0
    r = json.loads(cli("record", "--file", big, "--json", db=db).stdout)
    assert r["inserted"] == 0
    assert count(server, "stopped") == 60000


def test_bad_connections_are_clear_errors_and_change_nothing(server, tmp_path):
    m = write_lines(tmp_path / "m.jsonl", measurement_lines(3, 1, "x", workloads=1))
    server.createdb("target")
    wrong = cli("record", "--file", m, db=server.uri("target", password="wrong"), check=False)
    assert wrong.returncode == 1 and "password authentication failed" in wrong.stderr, wrong.stderr
    assert "wrong" not in wrong.stderr.replace("wrong-", "")  # the password is not echoed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    started = time.time()
    unreachable = cli("stats", db=f"postgresql://einsum:{PASSWORD}@127.0.0.1:{closed_port}/x",
                      check=False)
    assert unreachable.returncode == 1 and "cannot connect" in unreachable.stderr
    assert f"127.0.0.1:{closed_port}" in unreachable.stderr and time.time() - started < 30
    assert server.sql("target", "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0"
    # A database of another application: refused, untouched.
    server.createdb("shop")
    server.sql("shop", "CREATE TABLE customers(id int); INSERT INTO customers VALUES (1)")
    other = cli("record", "--file", m, db=server.uri("shop"), check=False)
    assert other.returncode == 1 and "not an einsumdb database" in other.stderr, other.stderr
    assert server.sql("shop", "SELECT string_agg(tablename, ',') FROM pg_tables WHERE "
                              "schemaname = 'public'") == "customers"
    # A newer schema: refused, untouched.
    newer = server.createdb("newer")
    cli("record", "--file", m, db=newer)
    server.sql("newer", "UPDATE einsumdb_meta SET value = '99' WHERE key = 'schema_version'")
    r = cli("record", "--file", m, db=newer, check=False)
    assert r.returncode == 1 and "schema version 99" in r.stderr, r.stderr
    r = cli("stats", db=newer, check=False)
    assert r.returncode == 1 and "newer than this einsumdb" in r.stderr
    assert count(server, "newer") == 3
    # A store of schema 4 (before the networks table and the sizes): read-only use asks for one
    # writing open, which migrates it to 7, keeps what it held and puts its workloads' sizes in.
    older = server.createdb("older")
    cli("record", "--file", m, db=older)
    server.sql("older", "DROP TABLE networks; DROP TABLE sizes; "
                        "UPDATE einsumdb_meta SET value = '4' WHERE key = 'schema_version'")
    r = cli("stats", db=older, check=False)
    assert r.returncode == 1 and "needs a migration" in r.stderr, r.stderr
    cli("record", "--file", m, db=older)
    assert json.loads(cli("stats", "--json", db=older).stdout)["schema_version"] == 8
    assert server.sql("older", "SELECT count(*) FROM networks") == "0"
    assert server.sql("older", "SELECT count(*) FROM sizes") == \
        server.sql("older", "SELECT count(*) FROM workloads WHERE symbols = 0") != "0"
    assert count(server, "older") == 3
    # A store of schema 6, whose sizes held the structure number as an axis of the cube: the
    # writing open rebuilds them with the structure in a column of its own, and the nearest size
    # is found from them.
    six = server.createdb("six")
    cli("record", "--file", m, db=six)
    server.sql("six", "DROP TABLE sizes; CREATE TABLE sizes(workload_id BIGINT PRIMARY KEY, "
                      "point cube NOT NULL); CREATE INDEX sizes_by_point ON sizes USING gist (point); "
                      "UPDATE einsumdb_meta SET value = '6' WHERE key = 'schema_version'")
    cli("record", "--file", m, db=six)
    assert json.loads(cli("stats", "--json", db=six).stdout)["schema_version"] == 8
    assert server.sql("six", "SELECT count(*) FROM sizes WHERE structure >= 0") == \
        server.sql("six", "SELECT count(*) FROM workloads WHERE symbols = 0") != "0"
    nearest = json.loads(cli("best", json.dumps(spec(9, 16, 24)), "--json", db=six).stdout)
    assert nearest["match"] == "nearest", nearest


def test_the_nearest_size_on_the_server_is_the_files(server, tmp_path):
    """Sizes never measured are answered by the nearest measured size of their structure: on a
    server from its index of sizes, the same workload at the same distance as in a SQLite file
    holding the same measurements (whose nearest sizes are tested against reading every
    workload). The grid has ties: the smallest hash wins on both."""
    rng = random.Random(5)
    lines = []
    for i in range(300):
        m, k, n = (rng.choice([4, 8, 16, 32, 64]) for _ in range(3))
        lines.append({"spec": spec(m, k, n), "run": "grid",
                      "transform": {"name": "loop_nest", "params": {"block": i % 5}},
                      "seconds": [1e-4 * (1 + i % 13)], "max_rel_err": 1e-15})
    recorded = write_lines(tmp_path / "grid.jsonl", lines)
    db, file = server.createdb("nearest"), str(tmp_path / "nearest.sqlite")
    for store in (db, file):
        cli("record", "--file", recorded, db=store)
    answered = 0
    for _ in range(25):
        m, k, n = (rng.randint(3, 90) for _ in range(3))
        asked = json.dumps(spec(m, k, n))
        there, here = (json.loads(cli("best", asked, "--json", db=store).stdout)
                       for store in (db, file))
        assert there["match"] == here["match"], (there, here)
        if there["match"] == "nearest":
            answered += 1
            assert abs(there["distance"] - here["distance"]) < 1e-9, (there, here)
            assert there["measured_on"] == here["measured_on"], (there, here)
    assert answered >= 20
    # The server answers from its sizes: every concrete workload has its point, and without
    # them it finds no nearest size.
    assert server.sql("nearest", "SELECT count(*) FROM sizes") == \
        server.sql("nearest", "SELECT count(*) FROM workloads WHERE symbols = 0")
    server.sql("nearest", "DELETE FROM sizes")
    r = cli("best", json.dumps(spec(33, 33, 33)), "--json", db=db, check=False)
    assert r.returncode == 3 and "nothing known" in r.stderr, (r.returncode, r.stderr)


def test_a_server_without_the_cube_extension_is_a_clear_error(server, tmp_path):
    """A user who may create tables but not extensions (CREATE on the schema, not on the
    database): the store is refused with what the server lacks, and nothing is left behind."""
    server.createdb("noext")
    server.sql("noext", f"CREATE ROLE limited LOGIN PASSWORD '{PASSWORD}'; "
                        "GRANT CREATE ON SCHEMA public TO limited")
    m = write_lines(tmp_path / "m.jsonl", measurement_lines(3, 1, "x", workloads=1))
    limited = f"postgresql://limited:{PASSWORD}@127.0.0.1:{server.port}/noext"
    r = cli("record", "--file", m, db=limited, check=False)
    assert r.returncode == 1 and "cube extension" in r.stderr, r.stderr
    assert "CREATE EXTENSION cube" in r.stderr and PASSWORD not in r.stderr
    assert server.sql("noext", "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == "0"


def measured(db):
    """The measurements that succeeded, by workload hash, as `export` writes them: (machine,
    strategy, parameters, median) in order."""
    out = collections.defaultdict(list)
    for line in cli("export", db=db).stdout.splitlines():
        r = json.loads(line)
        if r["status"] == "ok":
            out[r["workload"]["hash"]].append((r["machine"]["fingerprint"], r["transform"]["name"],
                                               json.dumps(r["transform"]["params"], sort_keys=True),
                                               r["median_s"]))
    return {h: sorted(rows) for h, rows in out.items()}


def top_answers(db, hashes):
    out = {}
    for h in hashes:
        rows = json.loads(cli("show", h, "--json", db=db).stdout)["measurements"]
        out[h] = [(r["machine"]["fingerprint"], r["transform"]["name"],
                   json.dumps(r["transform"]["params"], sort_keys=True), r["median_s"])
                  for r in rows if r["status"] == "ok"]
    return out


def sync(source, target, *flags):
    r = subprocess.run([EINSUMDB, "sync", source, target, "--json", *flags], capture_output=True,
                       text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_sync_file_to_server_to_file(server, tmp_path):
    source = str(tmp_path / "source.sqlite")
    lines = measurement_lines(3000, 7, "nightly", workloads=40)
    lines += [dict(l, status="invalid", max_rel_err=0.5) for l in lines[:10]]
    cli("record", "--file", write_lines(tmp_path / "m.jsonl", lines), db=source)
    cli("tune", "ij,jk->ik", "--shape", "A=24x24", "B=24x24", "--min-time", "0.01",
        "--min-reps", "3", "--warmup", "1", db=source)
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({
        "inputs": {"A": {"shape": [32, 16]}, "B": {"shape": [16, 8]}},
        "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]}]}))
    cli("plan", str(graph), "-P", "2", "--record", db=source)
    db = server.createdb("synced")
    fresh = str(tmp_path / "fresh.sqlite")
    there = sync(source, db, "--batch", "700")
    total = json.loads(cli("stats", "--json", db=source).stdout)["measurements"]
    assert there["inserted"] == total and there["batches"] == (total + 699) // 700
    assert there["rooflines"] >= 1 and there["partitionings"] >= 1
    back = sync(db, fresh)
    assert back["inserted"] == total
    hashes = [w["hash"] for w in json.loads(cli("list", "--json", db=source).stdout)]
    assert len(hashes) == 41
    # Every measurement, in one export of each store; what `show` answers, on a few workloads.
    everything = measured(source)
    assert set(everything) == set(hashes)
    assert measured(fresh) == everything and measured(db) == everything
    assert top_answers(source, hashes[:5]) == top_answers(fresh, hashes[:5])
    assert top_answers(db, hashes[:5]) == top_answers(source, hashes[:5])
    # A selection: only one strategy's measurements move.
    selected = sync(source, str(tmp_path / "selected.sqlite"), "--strategy", "loop_nest")
    loop_nest = sum(1 for line in cli("export", "--strategy", "loop_nest", db=source).stdout
                    .splitlines() if line)
    assert selected["inserted"] == loop_nest and 0 < loop_nest < total
    # Twice: nothing moves.
    for a, b in ((source, db), (db, fresh)):
        again = sync(a, b)
        assert again["inserted"] == 0 and again["duplicates"] == total
        assert again["partitionings"] == 0 and again["runs"] == 0
    assert count(server, "synced") == total


def test_db_check_finds_a_broken_reference_on_the_server(server, tmp_path):
    db = server.createdb("broken")
    cli("record", "--file", write_lines(tmp_path / "m.jsonl", measurement_lines(5, 1, "x")), db=db)
    assert json.loads(cli("db", "check", "--json", db=db).stdout)["ok"]
    server.sql("broken", "UPDATE measurements SET run_id = 999999 WHERE id = "
                         "(SELECT min(id) FROM measurements)")
    r = cli("db", "check", "--json", db=db, check=False)
    report = json.loads(r.stdout)
    assert not report["ok"] and r.returncode != 0
    assert any("measurements" in p and "runs" in p for p in report["problems"]), report


def test_read_transactions_on_the_server(server):
    """BEGIN sent with a read transaction's first statement and ROLLBACK not waited for: one
    snapshot until the end, and a connection as usable as before (tests/db_read_test.cpp)."""
    binary = os.environ.get("EINSUMDB_DB_READ_TEST")
    if not binary:
        pytest.skip("EINSUMDB_DB_READ_TEST is not set (ctest sets it)")
    r = subprocess.run([binary, "--gtest_filter=*server*"], capture_output=True, text=True,
                       env=dict(ENV, EINSUMDB_TEST_SERVER=server.createdb("reads")), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[  PASSED  ] 3 tests" in r.stdout and "SKIPPED" not in r.stdout, r.stdout


def test_the_python_module_uses_the_server(server):
    try:
        import numpy as np
        import einsumdb
    except ImportError as e:
        pytest.skip(f"the Python module is not built here ({e})")
    db = server.createdb("python")
    store = einsumdb.Store(db)
    assert store.path.endswith(f"127.0.0.1:{server.port}/python") and PASSWORD not in store.path
    assert store.list() == []
    r = store.record(measurement_lines(30, 5, "from python", workloads=3))
    assert r["inserted"] == 30
    assert store.best(spec(8, 16, 24))["match"] == "exact"
    # best_many reads the workloads' facts in one statement on the server: the answers best gives
    # one by one, in the order asked, None where nothing is known (exact=True: no nearest size).
    asked = [spec(8 + w % 4, 16, 24) for w in range(7)] + [spec(99, 16, 24)]
    many = store.best_many(asked, exact=True)
    assert many == [store.best(s, exact=True) for s in asked]
    assert many[-1] is None and all(a["match"] == "exact" for a in many[:3])
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((20, 16)), rng.standard_normal((16, 12))
    got = einsumdb.batched_einsum("ik,kj->ij", [[a, b]], db=db)[0]
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    report = einsumdb.tune("ik,kj->ij", shapes={"A": [20, 16], "B": [16, 12]}, db=db,
                           min_time=0.01, min_reps=3, warmup=1, progress=False)
    assert report["run"] > 0
    assert store.stats()["measurements"] == 30 + report["measured"]


def test_an_interrupted_sync_resumes(server, tmp_path):
    source = str(tmp_path / "big.sqlite")
    cli("record", "--file", write_lines(tmp_path / "m.jsonl",
                                        measurement_lines(40000, 11, "big", workloads=400)),
        db=source)
    db = server.createdb("resumed")
    p = subprocess.Popen([EINSUMDB, "sync", source, db, "--batch", "1000", "--json"], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        tables = server.sql("resumed", "SELECT count(*) FROM pg_tables WHERE tablename = "
                                       "'measurements'")
        if tables == "1" and count(server, "resumed") > 0:
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    time.sleep(0.5)
    copied = count(server, "resumed")
    assert 0 < copied < 40000, "the sync was not interrupted midway; make the source larger"
    assert copied % 1000 == 0, "a batch was half-written"
    again = sync(source, db)
    assert again["inserted"] == 40000 - copied and again["duplicates"] == copied
    assert count(server, "resumed") == 40000


CAMPAIGN_FLAGS = ["--min-time", "0.01", "--min-reps", "3", "--warmup", "1"]


def campaign_file(tmp_path):
    lines = ["# four small workloads",
             json.dumps(spec(24, 16, 20)),
             json.dumps({"spec": {"einsum": "ij,j->i", "batch": [["A", "x"]],
                                  "shapes": {"A": [32, "N"], "x": ["N"]}}, "bind": {"N": 40}}),
             json.dumps(spec(12, 40, 8)),
             json.dumps({"einsum": "ijk,kl->ijl", "batch": [["A", "B"]],
                         "shapes": {"A": [4, 6, 8], "B": [8, 5]}})]
    path = tmp_path / "campaign.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_campaign_under_mpirun_fills_the_server(server, tmp_path):
    db = server.createdb("campaign")
    f = campaign_file(tmp_path)
    r = subprocess.run(["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", EINSUMDB,
                        "tune", "--file", f, "--db", db, "--json", "--progress", *CAMPAIGN_FLAGS],
                       capture_output=True, text=True, env=MPI_ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # rank 0 alone prints the campaign
    assert out["ranks"] == 2 and out["workloads"] == 4 and out["tuned"] == 4, out
    assert sorted(row["line"] for row in out["results"]) == [2, 3, 4, 5]
    assert "rank 1: workload 1/2" in r.stderr and "time each other's noise" in r.stderr
    assert count(server, "campaign", "runs") == 4
    assert next(row for row in out["results"] if row["line"] == 3)["binding"] == {"N": 40}
    # Resumed: everything is tuned already, so nothing runs; --retune tunes again.
    again = json.loads(cli("tune", "--file", f, "--json", *CAMPAIGN_FLAGS, db=db).stdout)
    assert again["skipped"] == 4 and "tuned" not in again
    assert count(server, "campaign", "runs") == 4
    retuned = json.loads(cli("tune", "--file", f, "--json", "--retune", *CAMPAIGN_FLAGS,
                             db=db).stdout)
    assert retuned["tuned"] == 4 and count(server, "campaign", "runs") == 8


def test_a_bad_campaign_names_its_line_and_tunes_nothing(server, tmp_path):
    db = server.createdb("badcampaign")
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(spec(8, 8, 8)) + "\n" + '{"spec": {"einsum": "ij->"}, "bnd": 1}\n')
    r = cli("tune", "--file", str(f), *CAMPAIGN_FLAGS, db=db, check=False)
    assert r.returncode == 2 and f"{f}:2: unknown key 'bnd'" in r.stderr, r.stderr
    r = cli("tune", "ij,j->i", "--file", str(f), db=db, check=False)
    assert r.returncode == 2 and "not both" in r.stderr
    assert server.sql("badcampaign", "SELECT count(*) FROM pg_tables WHERE "
                                     "schemaname = 'public'") == "0"
