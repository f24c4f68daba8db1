"""einsumdb on a cluster of hosts that share neither network nor disks, made on this machine by
scripts/cluster.sh: two hosts (network, mount and UTS namespaces; a /tmp, HOME and store of
their own), ranks launched on them by mpirun through a launcher agent as on real nodes, and
talking TCP over the hosts' links. Checked against numpy and one process: graphs whose inputs
exist only on the hosts that read them (or only on rank 0's), outputs gathered to rank 0's host,
refusals that name the host, the stores of the hosts and a team PostgreSQL server on one of them,
and faults (a cut link, a killed rank) that end the job within its time-out.

Skipped, with the reason printed, where namespaces cannot be made (not root, no iproute2)."""
import atexit
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "scripts", "cluster.sh")


def installed_on_every_host(path):
    """The executable where every host sees it. Each host mounts a /tmp of its own, so a build
    under /tmp (a clone made there) is invisible to them: it is copied to /var/tmp, as a cluster
    has einsumdb installed on each node, and removed when the tests end."""
    real = os.path.realpath(path)
    if real != "/tmp" and not real.startswith("/tmp/"):
        return path
    where = tempfile.mkdtemp(prefix="einsumdb-bin-", dir="/var/tmp")
    atexit.register(shutil.rmtree, where, True)
    copy = os.path.join(where, os.path.basename(real))
    shutil.copy2(real, copy)
    return copy


EINSUMDB = installed_on_every_host(os.path.abspath(os.environ.get("EINSUMDB_BIN", "einsumdb")))
JOB = "/tmp/job"  # the working directory of a job, on every host: each host's own /tmp

CHAIN = {"inputs": {"A": {"shape": [96, 80]}, "B": {"shape": [80, 64]},
                    "C": {"shape": [96, 12]}, "D": {"shape": [12, 200]},
                    "E": {"shape": [200, 64]}},
         "nodes": [{"name": "AB", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
                   {"name": "DE", "einsum": "ij,jk->ik", "inputs": ["D", "E"]},
                   {"name": "CDE", "einsum": "ij,jk->ik", "inputs": ["C", "DE"]},
                   {"name": "Z", "einsum": "ij,ij->ij", "inputs": ["AB", "CDE"],
                    "join": "add"}]}

# Eight nodes: products, a batch index, reductions, a max-plus step and two outputs.
LARGER = {"inputs": {"X": {"shape": [64, 48]}, "W1": {"shape": [48, 96]},
                     "W2": {"shape": [96, 32]}, "W3": {"shape": [32, 16]},
                     "Q": {"shape": [8, 64, 24]}, "K": {"shape": [8, 40, 24]},
                     "V": {"shape": [8, 40, 16]}},
          "nodes": [{"name": "H1", "einsum": "ij,jk->ik", "inputs": ["X", "W1"]},
                    {"name": "H2", "einsum": "ij,jk->ik", "inputs": ["H1", "W2"]},
                    {"name": "H3", "einsum": "ij,jk->ik", "inputs": ["H2", "W3"]},
                    {"name": "S", "einsum": "bik,bjk->bij", "inputs": ["Q", "K"]},
                    {"name": "O", "einsum": "bij,bjd->bid", "inputs": ["S", "V"]},
                    {"name": "P", "einsum": "bid,id->bi", "inputs": ["O", "H3"]},
                    {"name": "M", "einsum": "bi,bi->i", "inputs": ["P", "P"], "agg": "max"},
                    {"name": "T", "einsum": "ij,jk->ik", "inputs": ["H2", "W3"],
                     "join": "add", "agg": "max"}],
          "outputs": ["P", "M", "T"]}


def cannot_make_namespaces():
    if os.geteuid() != 0:
        return "needs root to make network and mount namespaces"
    for tool in ("ip", "unshare", "nsenter", "mpirun"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    probe = subprocess.run(["ip", "netns", "add", f"edbprobe{os.getpid()}"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        return "cannot make a network namespace here: " + probe.stderr.strip()
    subprocess.run(["ip", "netns", "delete", f"edbprobe{os.getpid()}"], capture_output=True)
    return None


pytestmark = pytest.mark.skipif(cannot_make_namespaces() is not None,
                                reason=str(cannot_make_namespaces()))


class Cluster:
    def __init__(self, hosts, rate=None):
        # Not under /tmp: each host mounts a /tmp of its own over it.
        self.dir = tempfile.mkdtemp(prefix="einsumdb-cluster-", dir="/var/tmp")
        t0 = time.monotonic()
        cmd = ["bash", SCRIPT, "up", self.dir, str(hosts)] + ([rate] if rate else [])
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)
        self.setup_s = time.monotonic() - t0
        self.hosts = [f"h{k}" for k in range(hosts)]
        self.stage = os.path.join(self.dir, "stage")  # seen by every host: the fixture's files
        os.makedirs(self.stage)

    def down(self):
        t0 = time.monotonic()
        subprocess.run(["bash", SCRIPT, "down", self.dir], capture_output=True, timeout=60)
        return time.monotonic() - t0

    def on(self, host, *cmd, timeout=120, check=True):
        r = subprocess.run([os.path.join(self.dir, "on"), host, *cmd], capture_output=True,
                           text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"{host}: {cmd}: {r.stderr}"
        return r

    def put(self, host, path, data):
        """Writes `data` (text, JSON-able or a numpy array) to `path` on `host` only."""
        src = os.path.join(self.stage, "put-" + os.path.basename(path))
        if isinstance(data, np.ndarray):
            src += ".npy"
            np.save(src, data)
        else:
            with open(src, "w") as f:
                f.write(data if isinstance(data, str) else json.dumps(data))
        self.on(host, "mkdir", "-p", os.path.dirname(path))
        self.on(host, "cp", src, path)
        os.remove(src)

    def exists(self, host, path):
        return self.on(host, "test", "-e", path, check=False).returncode == 0

    def mpirun_argv(self, np_, per_host, args):
        return [os.path.join(self.dir, "mpirun"), "-np", str(np_), "--map-by",
                f"ppr:{per_host}:node", "-x", "OPENBLAS_NUM_THREADS=1", EINSUMDB, *args]

    def mpirun(self, np_, per_host, args, timeout=120):
        return subprocess.run(self.mpirun_argv(np_, per_host, args), capture_output=True,
                              text=True, timeout=timeout)

    def spawn(self, np_, per_host, args):
        return subprocess.Popen(self.mpirun_argv(np_, per_host, args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def einsumdb(self, host, *args, timeout=120, check=True):
        return self.on(host, EINSUMDB, *args, timeout=timeout, check=check)

    def ranks_on(self, host, name="einsumdb"):
        out = subprocess.run([os.path.join(self.dir, "pids"), host], capture_output=True,
                             text=True).stdout.split()
        pids = []
        for pid in out:
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == name:
                        pids.append(int(pid))
            except OSError:
                pass
        return pids


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(2)
    print(f"\ncluster of 2 hosts up in {c.setup_s:.2f} s")
    yield c
    print(f"\ncluster down in {c.down():.2f} s")


def inputs_of(graph, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(t["shape"]) for n, t in graph["inputs"].items()}


def chain_result(x):
    return x["A"] @ x["B"] + x["C"] @ (x["D"] @ x["E"])


def where_ranks_run(cluster, np_, per_host):
    """The host of each rank, as mpirun maps them."""
    argv = [os.path.join(cluster.dir, "mpirun"), "-np", str(np_), "--map-by",
            f"ppr:{per_host}:node", "sh", "-c", 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"']
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    hosts = {}
    for line in out.split("\n"):
        if line.strip():
            rank, host = line.split()
            hosts[int(rank)] = host
    return [hosts[r] for r in range(np_)]


def plan_for(cluster, graph, np_, name):
    gpath = os.path.join(cluster.stage, name + ".json")
    with open(gpath, "w") as f:
        json.dump(graph, f)
    ppath = os.path.join(cluster.stage, f"{name}-plan{np_}.json")
    subprocess.run([EINSUMDB, "plan", gpath, "--procs", str(np_), "--output", ppath, "--json"],
                   check=True, capture_output=True, timeout=120)
    with open(ppath) as f:
        return gpath, ppath, json.load(f)


def place_job(cluster, graph, np_, name, files_on):
    """Copies the graph and its plan to every host, and each input to the hosts `files_on`
    names for it."""
    gpath, ppath, plan = plan_for(cluster, graph, np_, name)
    x = inputs_of(graph)
    for host in cluster.hosts:
        cluster.on(host, "rm", "-rf", JOB)
        cluster.on(host, "mkdir", "-p", JOB + "/in")
        cluster.on(host, "cp", gpath, f"{JOB}/{name}.json")
        cluster.on(host, "cp", ppath, f"{JOB}/plan.json")
    for n, hosts in files_on(plan).items():
        for host in hosts:
            cluster.put(host, f"{JOB}/in/{n}.npy", x[n])
    return x, plan


@pytest.mark.parametrize("np_,per_host", [(2, 1), (4, 2)])
def test_inputs_only_on_the_hosts_that_read_them(cluster, np_, per_host):
    hosts = where_ranks_run(cluster, np_, per_host)
    assert set(hosts) == {"h0", "h1"}

    def owners_hosts(plan):
        return {n: sorted({hosts[r] for r in rel["owners"]})
                for n, rel in plan["placement"]["inputs"].items()}

    x, plan = place_job(cluster, CHAIN, np_, "chain", owners_hosts)
    placed = owners_hosts(plan)
    # The test means something only if some input is absent from some host.
    assert any(len(h) < 2 for h in placed.values()), placed
    r = cluster.mpirun(np_, per_host, ["run", f"{JOB}/chain.json", "--plan", f"{JOB}/plan.json",
                                       "--inputs", f"{JOB}/in", "--output", f"{JOB}/out",
                                       "--verify", "--json", "--no-record"])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["verify"]["ok"], j["verify"]
    assert j["generated_inputs"] == []
    # The output is on rank 0's host, and equals numpy's.
    assert cluster.exists("h0", f"{JOB}/out/Z.npy")
    assert not cluster.exists("h1", f"{JOB}/out/Z.npy")
    cluster.on("h0", "cp", f"{JOB}/out/Z.npy", cluster.stage + "/Z.npy")
    z = np.load(cluster.stage + "/Z.npy")
    np.testing.assert_allclose(z, chain_result(x), rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("np_,per_host", [(2, 1), (4, 2)])
def test_inputs_only_on_rank_0s_host_are_shipped(cluster, np_, per_host):
    x, _ = place_job(cluster, CHAIN, np_, "chain", lambda plan: {n: ["h0"] for n in CHAIN["inputs"]})
    r = cluster.mpirun(np_, per_host, ["run", f"{JOB}/chain.json", "--plan", f"{JOB}/plan.json",
                                       "--inputs", f"{JOB}/in", "--read-inputs", "root",
                                       "--output", f"{JOB}/out", "--verify", "--json",
                                       "--no-record"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verify"]["ok"]
    cluster.on("h0", "cp", f"{JOB}/out/Z.npy", cluster.stage + "/Z.npy")
    np.testing.assert_allclose(np.load(cluster.stage + "/Z.npy"), chain_result(x), rtol=1e-12,
                               atol=1e-10)


def test_a_larger_graph_on_four_ranks_of_two_hosts(cluster):
    x, _ = place_job(cluster, LARGER, 4, "larger",
                     lambda plan: {n: cluster.hosts for n in LARGER["inputs"]})
    r = cluster.mpirun(4, 2, ["run", f"{JOB}/larger.json", "--plan", f"{JOB}/plan.json",
                              "--inputs", f"{JOB}/in", "--output", f"{JOB}/out", "--verify",
                              "--json", "--no-record"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verify"]["ok"]
    cluster.on("h0", "cp", f"{JOB}/out/M.npy", cluster.stage + "/M.npy")
    h2 = x["X"] @ x["W1"] @ x["W2"]
    o = np.einsum("bij,bjd->bid", np.einsum("bik,bjk->bij", x["Q"], x["K"]), x["V"])
    p = np.einsum("bid,id->bi", o, h2 @ x["W3"])
    np.testing.assert_allclose(np.load(cluster.stage + "/M.npy"), (p * p).max(axis=0),
                               rtol=1e-10)


def refused(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_what_a_host_lacks_is_refused_naming_the_host(cluster):
    place_job(cluster, CHAIN, 2, "chain", lambda plan: {n: ["h0"] for n in CHAIN["inputs"]})
    base = ["run", f"{JOB}/chain.json", "--plan", f"{JOB}/plan.json", "--no-record",
            "--timeout", "20"]
    t0 = time.monotonic()
    # Inputs on rank 0's host only, read by their owners: rank 1 lacks its blocks' files.
    r = cluster.mpirun(2, 1, base + ["--inputs", f"{JOB}/in", "--output", f"{JOB}/out"])
    refused(r, "rank 1 of 2 on h1", f"{JOB}/in/")
    assert "no file" in r.stderr
    assert not cluster.exists("h0", f"{JOB}/out"), "nothing is written after a refusal"
    # One file missing on h1, the rest there: an error, never generated data.
    for n in CHAIN["inputs"]:
        cluster.on("h0", "cp", f"{JOB}/in/{n}.npy", f"{cluster.stage}/{n}.npy")
        cluster.on("h1", "cp", f"{cluster.stage}/{n}.npy", f"{JOB}/in/{n}.npy")
    cluster.on("h1", "rm", f"{JOB}/in/E.npy")
    r = cluster.mpirun(2, 1, base + ["--inputs", f"{JOB}/in", "--verify"])
    refused(r, "rank 1 of 2 on h1", "input 'E'", f"{JOB}/in/E.npy")
    # Asked for: that input generated, the others read.
    r = cluster.mpirun(2, 1, base + ["--inputs", f"{JOB}/in", "--generate", "E", "--verify",
                                     "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["generated_inputs"] == ["E"]
    # The plan or the graph missing on h1.
    cluster.on("h1", "rm", f"{JOB}/plan.json")
    refused(cluster.mpirun(2, 1, base), "rank 1 of 2 on h1", "plan.json")
    cluster.on("h1", "rm", f"{JOB}/chain.json")
    refused(cluster.mpirun(2, 1, base), "rank 1 of 2 on h1", "no graph file")
    assert time.monotonic() - t0 < 90, "refusals must not wait for the time-out"


def test_ranks_run_rank_0s_choice_whatever_their_hosts_stores_hold(cluster):
    # The data plan on 2 ranks cuts AB's rows in two: a 48×80 by 80×64 product. Tuned on h0's
    # store only; h1's store is empty.
    place_job(cluster, CHAIN, 2, "chain", lambda plan: {})
    db = "/tmp/home/store.sqlite"
    for host in cluster.hosts:
        cluster.on(host, "rm", "-f", db)
    cluster.einsumdb("h0", "tune", "xy,yz->xz", "--shape", "P=48x80", "Q=80x64", "--batch",
                     "P,Q", "--strategies", "loop_nest,ttgt", "--min-reps", "1", "--min-time",
                     "0", "--warmup", "1", "--json", "--db", db)
    assert not cluster.exists("h1", db)
    r = cluster.mpirun(2, 1, ["run", f"{JOB}/chain.json", "--method", "data", "--json",
                              "--verify", "--db", db])
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    ab = j["steps"][0]
    assert ab["name"] == "AB"
    assert ab["kernels_agree"], ab
    assert [k["source"] for k in ab["rank_kernels"]] == ["best known", "best known"], ab
    # The measurements went to rank 0's store, none to h1.
    assert j["recorded"]["partitionings"] > 0 and j["recorded"]["db"] == db
    assert not cluster.exists("h1", db)


def postgres_bindir():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    return dirs[0] if dirs else None


@pytest.mark.skipif(postgres_bindir() is None, reason="PostgreSQL is not installed")
def test_a_team_server_on_one_host_serves_a_campaign_from_both(cluster):
    pg = postgres_bindir()
    data = "/tmp/pg"
    cluster.on("h0", "sh", "-c", f"mkdir -p {data} && chown postgres {data}")
    cluster.on("h0", "runuser", "-u", "postgres", "--", f"{pg}/initdb", "-D", data, "-U", "einsum",
               "-A", "trust", "-E", "UTF8")
    cluster.on("h0", "sh", "-c",
               f"echo 'host all all 10.231.0.0/24 trust' >> {data}/pg_hba.conf")
    cluster.on("h0", "runuser", "-u", "postgres", "--", f"{pg}/pg_ctl", "-D", data, "-l",
               f"{data}/log", "-w", "-o",
               f"-k {data} -c listen_addresses=10.231.0.1 -p 5432 -c fsync=off", "start")
    uri = "postgresql://einsum@10.231.0.1:5432/postgres"
    try:
        campaign = "".join(json.dumps({"einsum": "ij,jk->ik", "batch": [["A", "B"]],
                                       "shapes": {"A": [n, 24], "B": [24, n]}}) + "\n"
                           for n in (8, 12, 16, 20))
        for host in cluster.hosts:
            cluster.put(host, f"{JOB}/campaign.jsonl", campaign)
        r = cluster.mpirun(2, 1, ["tune", "--file", f"{JOB}/campaign.jsonl", "--db", uri,
                                  "--strategies", "loop_nest,ttgt", "--min-reps", "1",
                                  "--min-time", "0", "--warmup", "1", "--json",
                                  "--no-progress"], timeout=300)
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["ranks"] == 2 and j.get("tuned") == 4, j
        # Every fact is in the server, seen from the other host.
        listed = json.loads(cluster.einsumdb("h1", "list", "--db", uri, "--json").stdout)
        assert len(listed["workloads"] if isinstance(listed, dict) else listed) >= 4
        # A graph run with the server as its store: rank 0 asks it, both ranks run its choice.
        place_job(cluster, CHAIN, 2, "chain", lambda plan: {})
        r = cluster.mpirun(2, 1, ["run", f"{JOB}/chain.json", "--db", uri, "--json", "--verify"])
        assert r.returncode == 0, r.stderr
        assert all(s["kernels_agree"] for s in json.loads(r.stdout)["steps"])
    finally:
        cluster.on("h0", "runuser", "-u", "postgres", "--", f"{pg}/pg_ctl", "-D", data, "-m",
                   "immediate", "-w", "stop", check=False)


LONG = {"inputs": {"A": {"shape": [400, 400]}, "B": {"shape": [400, 400]}},
        "nodes": [{"name": "C", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
                  {"name": "D", "einsum": "ij,jk->ik", "inputs": ["C", "A"]},
                  {"name": "E", "einsum": "ij,jk->ki", "inputs": ["D", "B"]}]}


def ranks_end(cluster, limit=10):
    """Whether every host's ranks are gone within `limit` seconds (the launcher ends them by
    signals, a moment after mpirun itself returns)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if not any(cluster.ranks_on(host) for host in cluster.hosts):
            return True
        time.sleep(0.1)
    return False


def wait_for_ranks(cluster, host, n=1, limit=30):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if len(cluster.ranks_on(host)) >= n:
            return True
        time.sleep(0.05)
    return False


# A link cut mid-run is noticed twice: by the ranks, which give up on a wait after --timeout, and
# by mpirun, whose daemons probe idle links (the fixture's keepalive: about 5 s). Either way the
# job ends and says which host is gone. After a rank's abort, mpirun has orders in flight to the
# cut host's daemon, so its link is no longer idle: mpirun waits until TCP gives up on them,
# 0.2 s × (2^6 − 1) = 12.6 s at the fixture's tcp_retries2 = 5. The job so ends about 15 s after
# the cut when --timeout is 2 s; the bound leaves room for a loaded machine, and a hang would
# run into communicate()'s 90 s.
@pytest.mark.parametrize("timeout,said", [(2, "no progress for 2 s"), (60, "on node h1")])
def test_a_cut_link_ends_the_job_and_nothing_is_half_written(cluster, timeout, said):
    place_job(cluster, LONG, 2, "long", lambda plan: {})
    db = "/tmp/home/cut.sqlite"
    args = ["run", f"{JOB}/long.json", "--repeat", "100000", "--timeout", str(timeout), "--db", db]
    job = cluster.spawn(2, 1, args)
    try:
        assert wait_for_ranks(cluster, "h1")
        time.sleep(2)  # well into the runs
        subprocess.run([os.path.join(cluster.dir, "link"), "h1", "down"], check=True)
        t0 = time.monotonic()
        _, err = job.communicate(timeout=90)
        ended = time.monotonic() - t0
    finally:
        subprocess.run([os.path.join(cluster.dir, "link"), "h1", "up"], check=True)
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0
    assert ended < min(timeout, 6) + 12.6 + 10, ended
    assert said in err, err
    assert ranks_end(cluster), {h: cluster.ranks_on(h) for h in cluster.hosts}
    # Nothing of the interrupted run in the store, and the store is whole.
    if cluster.exists("h0", db):
        check = cluster.einsumdb("h0", "db", "check", "--db", db, "--json", check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        listed = cluster.einsumdb("h0", "list", "--db", db, "--json")
        assert "long" not in listed.stdout
    # The same job runs once the link is back.
    r = cluster.mpirun(2, 1, ["run", f"{JOB}/long.json", "--repeat", "2", "--timeout", "30",
                              "--db", db, "--verify", "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verify"]["ok"]


def test_a_killed_rank_on_the_other_host_ends_the_job(cluster):
    place_job(cluster, LONG, 2, "long", lambda plan: {})
    job = cluster.spawn(2, 1, ["run", f"{JOB}/long.json", "--repeat", "100000", "--timeout",
                               "30", "--no-record"])
    try:
        assert wait_for_ranks(cluster, "h1")
        time.sleep(1.5)
        for pid in cluster.ranks_on("h1"):
            os.kill(pid, 9)
        t0 = time.monotonic()
        job.communicate(timeout=60)
        ended = time.monotonic() - t0
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0
    assert ended < 20, ended
    assert ranks_end(cluster), {h: cluster.ranks_on(h) for h in cluster.hosts}


# A link shaped to 200 Mbit/s (25 MB/s): the network the time model learns is the one the job runs
# on.
def test_the_network_is_measured_and_the_plan_priced_on_it():
    c = Cluster(2, rate="200mbit")
    try:
        argv = [os.path.join(c.dir, "mpirun"), "-np", "2", "--map-by", "ppr:1:node", EINSUMDB, "bench", "network", "--sizes", "8", "65536",
                "8388608", "--repeat", "2", "--output", "/tmp/net.json", "--record", "--json"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["hosts"] == ["h0", "h1"] and j["ranks_fill_hosts_in_order"]
        [pair] = j["pairs"]
        assert pair["hosts"] == ["h0", "h1"]
        net = j["network"]
        # tbf lets no more than its rate through, but a message starts with its burst (256 kB)
        # at once: 3 % of the 8 MiB that gives the bandwidth. TCP reaches most of the rate.
        assert 0.5 * 0.025 < net["bandwidth_gbs"] < 1.1 * 0.025, net
        assert 0 < net["latency_s"] < 0.01, net
        assert net["ranks_per_host"] == 1
        assert c.exists("h0", "/tmp/net.json") and not c.exists("h1", "/tmp/net.json")
        assert c.exists("h0", j["recorded"]["db"]) and not c.exists("h1", j["recorded"]["db"])

        # The chain planned and run on the measured network: the plan file carries the prediction
        # and the run states it beside what each step measured, pricing exactly what was sent.
        for host in c.hosts:
            c.on(host, "mkdir", "-p", JOB)
            c.put(host, f"{JOB}/chain.json", CHAIN)
        planned = c.einsumdb("h0", "plan", f"{JOB}/chain.json", "--procs", "2", "--network",
                             "/tmp/net.json", "--output", f"{JOB}/plan.json", "--json")
        plan = json.loads(planned.stdout)
        assert plan["predicted_seconds"] > 0
        assert plan["predicted_seconds"] == min(v for v in plan["method_seconds"].values() if v)
        assert all(s["predicted_time"]["seconds"] > 0 for s in plan["steps"][:-1])
        # The network recorded in h0's store serves as well as the file.
        stored = json.loads(c.einsumdb("h0", "plan", f"{JOB}/chain.json", "--procs", "2",
                                       "--network", "stored", "--json").stdout)
        assert stored["network"]["bandwidth_gbs"] == pytest.approx(net["bandwidth_gbs"])
        assert stored["network"]["source"].startswith(net["source"])
        c.put("h1", f"{JOB}/plan.json", c.on("h0", "cat", f"{JOB}/plan.json").stdout)
        r = c.mpirun(2, 1, ["run", f"{JOB}/chain.json", "--plan", f"{JOB}/plan.json",
                            "--network", "/tmp/net.json", "--no-overlap", "--verify", "--json",
                            "--no-record"])
        assert r.returncode == 0, r.stderr
        run = json.loads(r.stdout)
        assert run["verify"]["ok"]
        assert run["network"]["bandwidth_gbs"] == net["bandwidth_gbs"]
        for s in run["steps"]:
            p = s["predicted_time"]
            assert s["sent_bytes"] == p["host_bytes"] + p["local_bytes"], s["name"]
        assert run["predicted_seconds"] > 0

        # Measuring needs two ranks; a network that is neither a file nor figures is named.
        one = subprocess.run([os.path.join(c.dir, "mpirun"), "-np", "1", EINSUMDB, "bench",
                              "network"], capture_output=True, text=True, timeout=60)
        assert one.returncode == 2 and "two or more" in one.stderr
        bad = c.einsumdb("h0", "plan", f"{JOB}/chain.json", "--procs", "2", "--network",
                         "/tmp/missing.json", check=False)
        assert bad.returncode == 2 and "'/tmp/missing.json'" in bad.stderr
    finally:
        c.down()
